# Type stubs of the public API of jtree (docstrings live in the modules).
import os
from collections.abc import Awaitable, Callable, Generator, Iterator, Mapping, Sequence
from typing import Any, Literal, NamedTuple, Optional, TypeVar, Union, overload

import numpy as np

__version__: str

_PathLike = Union[str, os.PathLike[str]]
_FileObj = Any  # a binary file object (io.BytesIO, open(path, "rb"/"wb")...)
_Buffer = Union[bytes, bytearray, memoryview]
_Source = Union[_PathLike, "File", _FileObj, _Buffer]
_Progress = Union[bool, Callable[[int, int], object], None]
_Framework = Literal["numpy", "torch", "jax"]
_T = TypeVar("_T", bound=type)
_Key = Union[str, int]

class WriteStats(NamedTuple):
    leaves: int
    chunks: int
    raw_bytes: int
    stored_bytes: int
    file_size: int
    generation: int

class LeafSpec:
    kind: str
    shape: tuple[int, ...]
    dtype: Any
    nbytes: int
    scalar: bool
    type_name: Optional[str]
    def __init__(self, kind: str, shape: tuple[int, ...] = ..., dtype: Any = ..., nbytes: int = ...,
                 scalar: bool = ..., type_name: Optional[str] = ...) -> None: ...
    @property
    def ndim(self) -> int: ...
    @property
    def is_array(self) -> bool: ...

class DeviceStats(NamedTuple):
    direct_bytes: int
    buffered_bytes: int
    direct_io_note: str
    zero_copy_bytes: int = ...
    zero_copy_note: str = ...

class DeviceOptions:
    last_stats: Optional[DeviceStats]
    def __init__(self, *, staging_bytes: Optional[int] = ..., staging_buffers: Optional[int] = ...,
                 direct_io: Literal["auto", "on", "off"] = ...,
                 zero_copy: Literal["auto", "on", "off"] = ...,
                 allocation: Literal["grouped", "per_tensor"] = ...) -> None: ...
    @property
    def staging_bytes(self) -> Optional[int]: ...
    @property
    def staging_buffers(self) -> Optional[int]: ...
    @property
    def direct_io(self) -> str: ...
    @property
    def zero_copy(self) -> str: ...
    @property
    def allocation(self) -> str: ...

class RemoteOptions:
    endpoint: Optional[str]
    region: Optional[str]
    profile: Optional[str]
    access_key_id: Optional[str]
    secret_access_key: Optional[str]
    session_token: Optional[str]
    addressing: Optional[Literal["auto", "path", "virtual"]]
    part_size: Optional[int]
    upload_concurrency: Optional[int]
    max_retries: Optional[int]
    deadline: Optional[float]
    connect_timeout: Optional[float]
    stall_timeout: Optional[float]
    backoff_initial: Optional[float]
    backoff_max: Optional[float]
    max_concurrency: Optional[int]
    coalesce_gap: Optional[int]
    max_request_bytes: Optional[int]
    fetch_bytes: Optional[int]
    verify_tls: Optional[bool]
    ca_file: Optional[str]
    ca_path: Optional[str]
    http2: Optional[bool]
    http_headers: Optional[tuple[str, ...]]
    allow_full_download: Optional[bool]
    full_download_max_bytes: Optional[int]
    def __init__(self, endpoint: Optional[str] = ..., region: Optional[str] = ...,
                 profile: Optional[str] = ..., access_key_id: Optional[str] = ...,
                 secret_access_key: Optional[str] = ..., session_token: Optional[str] = ...,
                 addressing: Optional[Literal["auto", "path", "virtual"]] = ...,
                 part_size: Optional[int] = ..., upload_concurrency: Optional[int] = ...,
                 max_retries: Optional[int] = ..., deadline: Optional[float] = ...,
                 connect_timeout: Optional[float] = ..., stall_timeout: Optional[float] = ...,
                 backoff_initial: Optional[float] = ..., backoff_max: Optional[float] = ...,
                 max_concurrency: Optional[int] = ..., coalesce_gap: Optional[int] = ...,
                 max_request_bytes: Optional[int] = ..., fetch_bytes: Optional[int] = ...,
                 verify_tls: Optional[bool] = ..., ca_file: Optional[str] = ...,
                 ca_path: Optional[str] = ..., http2: Optional[bool] = ...,
                 http_headers: Union[None, Sequence[str], Mapping[str, str]] = ...,
                 allow_full_download: Optional[bool] = ...,
                 full_download_max_bytes: Optional[int] = ...) -> None: ...
    def settings(self) -> dict[str, Any]: ...

def release_pinned_memory() -> int: ...
def release_scratch_memory() -> int: ...

class Future(Awaitable[Any]):
    @property
    def pytree(self) -> Any: ...
    def done(self) -> bool: ...
    def result(self, timeout: Optional[float] = ...) -> Any: ...
    def exception(self, timeout: Optional[float] = ...) -> Optional[BaseException]: ...
    def add_done_callback(self, fn: Callable[[Future], object]) -> None: ...
    def __await__(self) -> Generator[Any, None, Any]: ...

class LazyArray:
    @property
    def shape(self) -> tuple[int, ...]: ...
    @property
    def dtype(self) -> Any: ...
    @property
    def ndim(self) -> int: ...
    @property
    def size(self) -> int: ...
    @property
    def nbytes(self) -> int: ...
    @property
    def chunk_shape(self) -> tuple[int, ...]: ...
    @property
    def chunk_bounds(self) -> tuple[tuple[int, ...], ...] | None: ...
    @property
    def path(self) -> str: ...
    @property
    def spec(self) -> LeafSpec: ...
    def __len__(self) -> int: ...
    def __getitem__(self, index: Any) -> Any: ...
    def get(self, index: Any, framework: _Framework = ..., device: Any = ...,
            map_location: Any = ...,
            device_options: Optional[DeviceOptions] = ...) -> Any: ...
    def read(self, **options: Any) -> Any: ...
    def __array__(self, dtype: Any = ..., copy: Any = ...) -> np.ndarray: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __dlpack__(self, *args: Any, **kwargs: Any) -> Any: ...
    def __dlpack_device__(self) -> tuple[int, int]: ...

class Node:
    @property
    def kind(self) -> str: ...
    @property
    def type_name(self) -> Optional[str]: ...
    @property
    def path(self) -> str: ...
    def keyed(self) -> bool: ...
    def keys(self) -> list[Any]: ...
    def __len__(self) -> int: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __contains__(self, key: Any) -> bool: ...
    def __getitem__(self, key: Any) -> Any: ...
    def load(self, pytree: Any = ..., **options: Any) -> Any: ...

class File:
    name: str
    verify_checksums: bool
    threads: int
    device_options: Optional[DeviceOptions]
    allow_pickle: bool
    strict: bool
    def __init__(self, path: _PathLike, *, verify: bool = ..., threads: int = ...,
                 allow_pickle: bool = ..., strict: bool = ..., use_mmap: Optional[bool] = ...,
                 limits: Optional[Mapping[str, int]] = ...,
                 mmap: Union[bool, str] = ..., framework: _Framework = ...,
                 device: Any = ..., map_location: Any = ...,
                 allow_full_download: bool = ...,
                 device_options: Optional[DeviceOptions] = ...,
                 remote: Optional[RemoteOptions] = ...) -> None: ...
    @property
    def root(self) -> Any: ...
    def __getitem__(self, key: Any) -> Any: ...
    def __contains__(self, key: Any) -> bool: ...
    def __iter__(self) -> Iterator[Any]: ...
    def __len__(self) -> int: ...
    def keys(self) -> list[Any]: ...
    def at(self, key_path: str) -> Any: ...
    def structure(self, strict: Optional[bool] = ...) -> Any: ...
    def load(self, pytree: Any = ..., **options: Any) -> Any: ...
    @property
    def metadata(self) -> dict[str, Union[str, bytes]]: ...
    def info(self) -> dict[str, Any]: ...
    def io_stats(self) -> dict[str, int]: ...
    def verify(self, *, progress: _Progress = ...) -> dict[str, Any]: ...
    def close(self) -> None: ...
    def __enter__(self) -> File: ...
    def __exit__(self, *exc: Any) -> None: ...

def save(tree: Any, path: Union[_PathLike, _FileObj], *, partial_write: bool = ...,
         overwrite: bool = ...,
         overwrite_foreign: bool = ..., allow_pickle: bool = ...,
         compression: Optional[Literal["zstd", "raw", "none"]] = ..., level: Optional[int] = ...,
         chunk_bytes: Optional[int] = ..., inline_threshold: Optional[int] = ...,
         threads: int = ..., sync: bool = ...,
         metadata: Optional[Mapping[str, Union[str, bytes]]] = ...,
         coordinator: Optional[Coordinator] = ..., progress: _Progress = ...,
         shard_layout: Union[None, int, TensorParallel] = ...,
         remote: Optional[RemoteOptions] = ...) -> WriteStats: ...
def dumps(tree: Any, *, allow_pickle: bool = ...,
          compression: Optional[Literal["zstd", "raw", "none"]] = ..., level: Optional[int] = ...,
          chunk_bytes: Optional[int] = ..., inline_threshold: Optional[int] = ...,
          threads: int = ..., metadata: Optional[Mapping[str, Union[str, bytes]]] = ...,
          progress: _Progress = ...) -> bytes: ...
def loads(data: _Buffer, pytree: Any = ..., **options: Any) -> Any: ...
def nonblocking_save(tree: Any, path: Union[_PathLike, _FileObj], *, partial_write: bool = ...,
                     overwrite: bool = ...,
                     overwrite_foreign: bool = ..., allow_pickle: bool = ...,
                     compression: Optional[Literal["zstd", "raw", "none"]] = ...,
                     level: Optional[int] = ..., chunk_bytes: Optional[int] = ...,
                     inline_threshold: Optional[int] = ..., threads: int = ..., sync: bool = ...,
                     metadata: Optional[Mapping[str, Union[str, bytes]]] = ...,
                     coordinator: Optional[Coordinator] = ...,
                     progress: _Progress = ...,
                     shard_layout: Union[None, int, TensorParallel] = ...,
                     remote: Optional[RemoteOptions] = ...) -> Future: ...
def load(path: _Source, pytree: Any = ..., *, keys: Union[str, Sequence[str], None] = ...,
         framework: _Framework = ..., cast: Any = ..., pad_truncate: bool = ..., out: Any = ...,
         allow_pickle: Optional[bool] = ..., strict: Optional[bool] = ...,
         verify: Optional[bool] = ..., threads: Optional[int] = ...,
         device: Any = ..., map_location: Any = ...,
         shardings: Any = ..., mmap: Union[bool, str, None] = ..., prune: bool = ...,
         progress: _Progress = ..., allow_full_download: bool = ...,
         device_options: Optional[DeviceOptions] = ...,
         slices: Any = ..., remote: Optional[RemoteOptions] = ...) -> Any: ...
def nonblocking_load(path: _Source, pytree: Any = ..., *,
                     keys: Union[str, Sequence[str], None] = ..., framework: _Framework = ...,
                     cast: Any = ..., pad_truncate: bool = ..., out: Any = ...,
                     allow_pickle: Optional[bool] = ..., strict: Optional[bool] = ...,
                     verify: Optional[bool] = ..., threads: Optional[int] = ...,
                     device: Any = ..., map_location: Any = ...,
                     shardings: Any = ..., mmap: Union[bool, str, None] = ..., prune: bool = ...,
                     progress: _Progress = ...,
                     allow_full_download: bool = ...,
                     remote: Optional[RemoteOptions] = ...,
                     device_options: Optional[DeviceOptions] = ...,
                     slices: Any = ...) -> Future: ...
def load_pytreedef(path: _Source, *, strict: bool = ...,
                   allow_full_download: bool = ...,
                   remote: Optional[RemoteOptions] = ...) -> Any: ...
def open(path: Union[_PathLike, _FileObj, _Buffer], *, verify: bool = ..., threads: int = ...,
         allow_pickle: bool = ...,
         strict: bool = ..., use_mmap: Optional[bool] = ...,
         limits: Optional[Mapping[str, int]] = ..., mmap: Union[bool, str] = ...,
         framework: _Framework = ..., device: Any = ...,
         map_location: Any = ..., allow_full_download: bool = ...,
         device_options: Optional[DeviceOptions] = ...,
         remote: Optional[RemoteOptions] = ...) -> File: ...
def compact(path: _PathLike, out_path: Optional[_PathLike] = ..., *, sync: bool = ...,
            remote: Optional[RemoteOptions] = ...) -> WriteStats: ...

class ConvertStats:
    src_format: str
    dst_format: str
    leaves: int
    array_bytes: int
    seconds: float
    verified: bool
    description: str
    output: str

def convert(src: _PathLike, dst: _PathLike, *, from_format: Optional[str] = ...,
            to_format: Optional[str] = ..., compression: Optional[str] = ...,
            level: Optional[int] = ..., chunk_bytes: Optional[int] = ...,
            max_shard_size: Optional[Union[int, str]] = ..., verify: bool = ...,
            progress: Union[bool, Callable[[int, int], object]] = ...,
            allow_pickle: bool = ..., overwrite: bool = ...,
            shard_layout: Union[None, int, TensorParallel] = ...,
            remote: Optional[RemoteOptions] = ...) -> ConvertStats: ...
def commit_segments(path: _PathLike, process_count: int, *, overwrite: bool = ...,
                    overwrite_foreign: bool = ..., keep_segments: bool = ..., verify: bool = ...,
                    sync: bool = ...,
                    progress: Optional[Callable[[int, int], Any]] = ...,
                    remote: Optional[RemoteOptions] = ...) -> WriteStats: ...

class GlobalArray:
    data: Any
    index: Any
    shape: Optional[tuple[int, ...]]
    replica_id: int
    def __init__(self, data: Any, index: Any, shape: Optional[Sequence[int]] = ..., *,
                 replica_id: int = ...) -> None: ...
    @property
    def blocks(self) -> list[tuple[Any, Any]]: ...
    def boxes(self, shape: tuple[int, ...]) -> list[tuple[tuple[int, int], ...]]: ...

class TensorParallel:
    rank: int
    world: int
    expert_parallel: bool
    rules: Optional[list[tuple[str, str, int]]]
    SKIP: Any
    def __init__(self, rank: int, world: int, *, expert_parallel: bool = ...,
                 rules: Union[Sequence[tuple[Any, ...]], Mapping[str, Any], None] = ...
                 ) -> None: ...
    @property
    def DEFAULT_RULES(self) -> list[tuple[str, str, int]]: ...
    def plan(self, file: Any, *, remote: Optional[RemoteOptions] = ...) -> dict[str, tuple[str, Any]]: ...

class Coordinator:
    process_index: int
    process_count: int
    def barrier(self, name: str) -> None: ...
    def all_gather(self, data: bytes) -> list[bytes]: ...
    def broadcast(self, data: bytes) -> bytes: ...
    def broadcast_object(self, obj: Any) -> Any: ...
    def gather_objects(self, obj: Any) -> list[Any]: ...

class JaxCoordinator(Coordinator):
    def __init__(self) -> None: ...
    def barrier(self, name: str) -> None: ...
    def all_gather(self, data: bytes) -> list[bytes]: ...

class MPICoordinator(Coordinator):
    comm: Any
    def __init__(self, comm: Any = ...) -> None: ...
    def barrier(self, name: str) -> None: ...
    def all_gather(self, data: bytes) -> list[bytes]: ...
    def broadcast(self, data: bytes) -> bytes: ...

class TorchCoordinator(Coordinator):
    group: Any
    def __init__(self, group: Any = ...) -> None: ...
    def barrier(self, name: str) -> None: ...
    def all_gather(self, data: bytes) -> list[bytes]: ...

class SingleProcess(Coordinator):
    def barrier(self, name: str) -> None: ...
    def all_gather(self, data: bytes) -> list[bytes]: ...

@overload
def register_pytree_node_serialization(
    nodetype: _T, *, serialized_name: str,
    serialize_auxdata: Callable[[Any], Union[bytes, str]],
    deserialize_auxdata: Callable[[bytes], Any],
    flatten_func: Optional[Callable[[Any], tuple[Union[list[Any], dict[_Key, Any]], Any]]] = ...,
    unflatten_func: Optional[Callable[[Any, Union[list[Any], dict[_Key, Any]]], Any]] = ...,
) -> _T: ...
@overload
def register_pytree_node_serialization(
    nodetype: None = ..., *, serialized_name: str,
    serialize_auxdata: Callable[[Any], Union[bytes, str]],
    deserialize_auxdata: Callable[[bytes], Any],
    flatten_func: Optional[Callable[[Any], tuple[Union[list[Any], dict[_Key, Any]], Any]]] = ...,
    unflatten_func: Optional[Callable[[Any, Union[list[Any], dict[_Key, Any]]], Any]] = ...,
) -> Callable[[_T], _T]: ...
@overload
def register_pytree_leaf_serialization(
    leaftype: _T, *, serialized_name: str, serialize_leaf: Callable[[Any], Union[bytes, str]],
    deserialize_leaf: Callable[[bytes], Any]) -> _T: ...
@overload
def register_pytree_leaf_serialization(
    leaftype: None = ..., *, serialized_name: str,
    serialize_leaf: Callable[[Any], Union[bytes, str]],
    deserialize_leaf: Callable[[bytes], Any]) -> Callable[[_T], _T]: ...

class Error(Exception):
    code: str
    file: Optional[str]
    key_path: Optional[str]
    def __init__(self, message: str, *, file: Optional[str] = ...,
                 key_path: Optional[str] = ...) -> None: ...

class CorruptionError(Error): ...
class StorageError(Error, OSError): ...
class InvalidArgumentError(Error, ValueError): ...
class NotSupportedError(Error): ...
class NotFoundError(Error, FileNotFoundError, LookupError): ...
class AlreadyExistsError(Error, FileExistsError): ...
class PermissionDeniedError(Error, PermissionError): ...
class AbortedError(Error): ...
class ResourceExhaustedError(Error): ...
