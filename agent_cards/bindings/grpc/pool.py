"""The private descriptor pool our generated A2A modules build into.

The a2a-sdk (our test-only interop peer) registers the same file (``a2a.proto``, symbols
``lf.a2a.v1.*``) in protobuf's default pool; two registrations of one name there clash
when both are imported in one process. Ours therefore live in :data:`POOL`, which holds
copies of the files ``a2a.proto`` imports (Google's API annotations and the well-known
types) taken from the default pool, where their own modules register them.
"""

from __future__ import annotations

from google.api import annotations_pb2, client_pb2, field_behavior_pb2
from google.protobuf import descriptor_pb2, descriptor_pool, empty_pb2, struct_pb2, timestamp_pb2

__all__ = ["POOL"]

_IMPORTED = (annotations_pb2, client_pb2, field_behavior_pb2, empty_pb2, struct_pb2, timestamp_pb2)


def _copy_into(pool: descriptor_pool.DescriptorPool, name: str, done: set[str]) -> None:
    """Add the default pool's file ``name`` to ``pool``, its dependencies first."""
    if name in done:
        return
    source = descriptor_pool.Default().FindFileByName(name)
    for dependency in source.dependencies:
        _copy_into(pool, dependency.name, done)
    proto = descriptor_pb2.FileDescriptorProto()
    source.CopyToProto(proto)
    pool.Add(proto)
    done.add(name)


def _private_pool() -> descriptor_pool.DescriptorPool:
    pool = descriptor_pool.DescriptorPool()
    done: set[str] = set()
    for module in _IMPORTED:
        _copy_into(pool, module.DESCRIPTOR.name, done)
    return pool


POOL = _private_pool()
