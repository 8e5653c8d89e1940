"""Settings of http(s):// and s3:// transfers, per call (``jtree.RemoteOptions``): the Python
face of ``jtree::RemoteOptions`` (lib/include/jtree/remote.h; docs/remote.md). The values are
checked by the C++ library (``jtree::check_remote_options``) when the object is made, and
settings given for a local file are refused there too: this module only carries them.
"""
from __future__ import annotations

import dataclasses
from typing import Any, Dict, Mapping, Optional, Sequence, Tuple, Union

from . import _jtree


@dataclasses.dataclass(frozen=True)
class RemoteOptions:
    """Settings of the remote backends for one call: ``jtree.open``, ``load``,
    ``load_pytreedef``, ``nonblocking_load``, ``save``, ``nonblocking_save``, ``compact`` and
    ``commit_segments`` take them as ``remote=``, so that one process can read and write
    several stores::

        minio = jtree.RemoteOptions(endpoint="http://127.0.0.1:9000", region="us-east-1",
                                    access_key_id="...", secret_access_key="...",
                                    addressing="path", max_concurrency=32)
        tree = jtree.load("s3://bucket/ckpt.jtree", remote=minio)

    A field left at None takes the library's default, or the environment's setting where it
    has one (AWS_* variables and the AWS shared files, as boto3 reads them: docs/remote.md).
    Given for a local path, ``remote=`` is an :class:`InvalidArgumentError` (it would go
    unused). Bad values are an :class:`InvalidArgumentError` naming the field, raised here.

    s3:// only: ``endpoint`` (an S3-compatible store, ``"http://host:port"``), ``region``,
    ``profile`` (of ~/.aws/config and ~/.aws/credentials), ``access_key_id`` /
    ``secret_access_key`` / ``session_token`` (given, they win over the environment and the
    profile), ``addressing`` (``"auto"``: virtual-hosted on AWS, path-style on a custom
    endpoint; ``"path"``; ``"virtual"``), ``part_size`` (bytes of a multipart upload's parts,
    5 MiB to 5 GiB, default 8 MiB) and ``upload_concurrency`` (parts uploaded at once,
    default 4; a save's memory is about part_size x (upload_concurrency + 1)).

    Every transfer (http(s):// and S3's requests): ``max_retries`` (retries of a request
    after its first attempt, default 8), ``deadline`` (seconds for one request, its retries
    included, default 300), ``connect_timeout`` (10), ``stall_timeout`` (seconds without a
    byte before a transfer is abandoned and retried, 30), ``backoff_initial`` /
    ``backoff_max`` (0.1 / 10 seconds), ``max_concurrency`` (requests in flight for one
    object, default 64), ``coalesce_gap`` (ranges closer than this are one request, 64 KiB),
    ``max_request_bytes`` (larger ranges are split, 32 MiB), ``fetch_bytes`` (a reader's
    largest fetch, 4 MiB), ``verify_tls`` (default True), ``ca_file`` / ``ca_path`` (CA
    bundle or directory), ``http2`` (default True), ``http_headers`` (extra headers of
    http(s):// requests: ``["Authorization: Bearer ..."]`` or a dict), ``allow_full_download``
    (a server that ignores Range requests: download the file once, whole, instead of failing
    with :class:`NotSupportedError`) and ``full_download_max_bytes`` (16 GiB).
    """

    endpoint: Optional[str] = None
    region: Optional[str] = None
    profile: Optional[str] = None
    access_key_id: Optional[str] = None
    secret_access_key: Optional[str] = None
    session_token: Optional[str] = None
    addressing: Optional[str] = None
    part_size: Optional[int] = None
    upload_concurrency: Optional[int] = None
    max_retries: Optional[int] = None
    deadline: Optional[float] = None
    connect_timeout: Optional[float] = None
    stall_timeout: Optional[float] = None
    backoff_initial: Optional[float] = None
    backoff_max: Optional[float] = None
    max_concurrency: Optional[int] = None
    coalesce_gap: Optional[int] = None
    max_request_bytes: Optional[int] = None
    fetch_bytes: Optional[int] = None
    verify_tls: Optional[bool] = None
    ca_file: Optional[str] = None
    ca_path: Optional[str] = None
    http2: Optional[bool] = None
    http_headers: Union[None, Sequence[str], Mapping[str, str]] = None
    allow_full_download: Optional[bool] = None
    full_download_max_bytes: Optional[int] = None

    def __post_init__(self) -> None:
        # Headers are kept as the library takes them: a tuple of "Name: value" lines.
        headers = self.http_headers
        if isinstance(headers, Mapping):
            object.__setattr__(self, "http_headers",
                               tuple(f"{k}: {v}" for k, v in headers.items()))
        elif headers is not None:
            object.__setattr__(self, "http_headers", tuple(headers))
        _jtree.check_remote_options(self.settings())

    def settings(self) -> Dict[str, Any]:
        """The fields set (not None), as the native module takes them."""
        return {f.name: getattr(self, f.name) for f in dataclasses.fields(self)
                if getattr(self, f.name) is not None}

    def __repr__(self) -> str:
        # Secrets are not shown (reprs end up in logs).
        shown = {k: ("***" if k in _SECRETS else v) for k, v in self.settings().items()}
        return "RemoteOptions(" + ", ".join(f"{k}={v!r}" for k, v in shown.items()) + ")"


_SECRETS: Tuple[str, ...] = ("secret_access_key", "session_token", "http_headers")


def settings(remote: Optional[RemoteOptions]) -> Optional[Dict[str, Any]]:
    """What the native calls take as ``remote=``: None (the environment's settings), or the
    fields ``remote`` sets. Anything but a RemoteOptions is a TypeError."""
    if remote is None:
        return None
    if not isinstance(remote, RemoteOptions):
        raise TypeError(f"remote= takes a jtree.RemoteOptions, not {type(remote).__qualname__}")
    return remote.settings()
