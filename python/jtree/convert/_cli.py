"""The ``jtree convert`` command: argument parsing and error reporting around convert().

Exit status: 0 done, 1 failed (``jtree convert: <message>`` on stderr), 2 usage error.
"""
from __future__ import annotations

import argparse
import dataclasses
import json
import sys
from typing import Any, List, NoReturn, Optional

from . import _registry

USAGE = "jtree convert SRC DST [options]"
DESCRIPTION = """\
Converts a checkpoint to or from a .jtree file, streaming (memory about one tensor).
Sources: safetensors (a file, or a Hugging Face sharded checkpoint: its
*.safetensors.index.json or its directory), PyTorch .pt/.bin, NumPy .npy/.npz, GGUF
(a split model: any of its NAME-0000i-of-0000n.gguf shards converts the whole set),
orbax / JAX pytree_serialization directories, flax msgpack, .jtree.
Destinations by extension: .jtree (default), .safetensors, .gguf; a directory takes a
Hugging Face safetensors checkpoint (model.safetensors, or with --max-shard-size the
model-0000i-of-0000n.safetensors shards and model.safetensors.index.json)."""

# Which interpreter runs the command: the one that answers --help, so it says so itself.
WHICH_PYTHON = """\
Running in: {python}
(the jtree command pip installs runs convert in its own Python; a jtree binary
built from source runs $JTREE_PYTHON if set, else python3 on PATH)"""


class _Parser(argparse.ArgumentParser):
    def error(self, message: str) -> NoReturn:  # usage errors: exit 2 with the usage
        self.print_usage(sys.stderr)
        sys.stderr.write(f"jtree convert: {message}\n")
        sys.exit(2)


def parser() -> argparse.ArgumentParser:
    """The argument parser of ``jtree convert``."""
    p = _Parser(prog="jtree convert", usage=USAGE, description=DESCRIPTION,
                epilog=WHICH_PYTHON.format(python=sys.executable),
                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("src", metavar="SRC", help="the checkpoint to convert")
    p.add_argument("dst", metavar="DST", help="the file to write")
    readers = [n for n, _ in _registry.READERS]
    p.add_argument("--from", dest="from_format", metavar="FMT",
                   help=f"the source format when detection does not tell ({', '.join(readers)})")
    p.add_argument("--to", dest="to_format", metavar="FMT",
                   help="the destination format (jtree, safetensors, gguf); default: from "
                        "DST's extension, else jtree")
    p.add_argument("--compression", choices=["zstd", "none"], default="zstd",
                   help="chunk compression of a .jtree destination (default zstd)")
    p.add_argument("--level", type=int, default=None, help="the zstd level")
    p.add_argument("--max-shard-size", metavar="SIZE", default=None,
                   help="safetensors output in shards of at most SIZE (bytes, or e.g. 5GB = "
                        "5*10^9 as transformers reads it, 512MiB), with a "
                        "NAME.safetensors.index.json, as save_pretrained writes them")
    p.add_argument("--shard-layout", metavar="WORLD", type=int, default=None,
                   help="a .jtree file laid out for tensor-parallel serving on WORLD ranks: "
                        "each rank's slices of the split weights (q/k/v, gate/up, o, down, "
                        "embeddings: jtree.TensorParallel's rules) are whole chunks, for WORLD "
                        "and every divisor of it")
    p.add_argument("--verify", action="store_true",
                   help="re-read DST and compare every leaf bit for bit with SRC")
    p.add_argument("--allow-pickle", action="store_true",
                   help="let a PyTorch file that needs full unpickling load (runs code: only "
                        "for files you trust)")
    p.add_argument("--no-overwrite", action="store_true", help="refuse an existing DST")
    remote = p.add_argument_group(
        "object storage (DST an s3:// .jtree file; as the other jtree commands' flags)")
    remote.add_argument("--endpoint", metavar="URL", help="an S3-compatible store's endpoint")
    remote.add_argument("--region", metavar="REGION")
    remote.add_argument("--profile", metavar="NAME", help="of ~/.aws/config and credentials")
    remote.add_argument("--addressing", choices=["auto", "path", "virtual"])
    remote.add_argument("--concurrency", metavar="N", type=int, dest="max_concurrency",
                        help="requests in flight at once")
    remote.add_argument("--retries", metavar="N", type=int, dest="max_retries")
    remote.add_argument("--timeout", metavar="SECONDS", type=float, dest="deadline",
                        help="for one request, its retries included")
    remote.add_argument("--connect-timeout", metavar="SECONDS", type=float)
    remote.add_argument("--part-size", metavar="BYTES", type=int,
                        help="of a multipart upload's parts")
    remote.add_argument("--header", metavar="'NAME: VALUE'", action="append",
                        dest="http_headers")
    remote.add_argument("--ca-file", metavar="FILE")
    remote.add_argument("--no-verify-tls", action="store_false", dest="verify_tls",
                        default=None)
    p.add_argument("-q", "--quiet", action="store_true", help="no progress bar, no summary")
    p.add_argument("--json", action="store_true",
                   help="the summary as one JSON object on stdout (src, dst, output: the file "
                        "written or its index, src_format, dst_format, description, leaves, "
                        "array_bytes, seconds, verified); no progress bar")
    return p


def main(argv: Optional[List[str]] = None) -> None:
    """Runs ``jtree convert`` with ``argv`` (default sys.argv[1:]); exits with its status."""
    sys.exit(run(sys.argv[1:] if argv is None else argv))


# The remote flags, as RemoteOptions' fields (argparse's dests).
REMOTE_FIELDS = ("endpoint", "region", "profile", "addressing", "max_concurrency",
                 "max_retries", "deadline", "connect_timeout", "part_size", "http_headers",
                 "ca_file", "verify_tls")


def remote_options(args: argparse.Namespace) -> Any:
    """The jtree.RemoteOptions of the remote flags given, or None (none given)."""
    given = {k: getattr(args, k) for k in REMOTE_FIELDS if getattr(args, k) is not None}
    if not given:
        return None
    from .._remote import RemoteOptions  # noqa: PLC0415

    return RemoteOptions(**given)


def run(argv: List[str]) -> int:
    """Runs ``jtree convert`` and returns its exit status."""
    args = parser().parse_args(argv)
    from .. import Error  # noqa: PLC0415
    from ._driver import convert  # noqa: PLC0415

    try:
        stats = convert(args.src, args.dst, from_format=args.from_format,
                        to_format=args.to_format,
                        compression=None if args.compression == "none" else args.compression,
                        level=args.level, max_shard_size=args.max_shard_size,
                        verify=args.verify, progress=not (args.quiet or args.json),
                        allow_pickle=args.allow_pickle, overwrite=not args.no_overwrite,
                        shard_layout=args.shard_layout, remote=remote_options(args))
    except (Error, OSError) as e:
        sys.stderr.write(f"jtree convert: {e}\n")
        return 1
    except KeyboardInterrupt:
        sys.stderr.write("jtree convert: interrupted\n")
        return 130
    if args.json:
        sys.stdout.write(json.dumps(dict(src=args.src, dst=args.dst,
                                         **dataclasses.asdict(stats))) + "\n")
    elif not args.quiet:
        sys.stderr.write(
            f"{args.src} ({stats.description or stats.src_format}) -> {args.dst} "
            f"({stats.dst_format}): "
            f"{stats.leaves} leaves, {stats.array_bytes} array bytes in {stats.seconds:.2f} s"
            f"{', verified' if stats.verified else ''}\n")
    return 0
