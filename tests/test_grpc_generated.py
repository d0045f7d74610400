"""The generated gRPC modules: fresh from the checked-in proto, and in a private pool."""

from __future__ import annotations

import subprocess
import sys

from google.protobuf import descriptor_pool, json_format

from agent_cards.bindings import regenerate
from agent_cards.bindings.grpc import a2a_pb2, a2a_pb2_grpc


def test_checked_in_modules_match_a_fresh_generation() -> None:
    """Editing the proto (or protoc's output) without regenerating is caught here."""
    assert regenerate.stale() == []


def test_our_modules_and_the_sdks_load_in_one_process() -> None:
    """Both register file a2a.proto with symbols lf.a2a.v1.*: ours stay out of the default
    pool, so importing the a2a-sdk's generated module beside them does not clash."""
    from a2a.types import a2a_pb2 as sdk_pb2

    ours = a2a_pb2.Message.DESCRIPTOR.file.pool
    assert ours is not descriptor_pool.Default()
    assert sdk_pb2.Message.DESCRIPTOR.file.pool is descriptor_pool.Default()
    message = a2a_pb2.Message(message_id="m-1", role=a2a_pb2.ROLE_USER)
    message.parts.add(text="hello")
    theirs = sdk_pb2.Message.FromString(message.SerializeToString())
    assert json_format.MessageToDict(theirs) == json_format.MessageToDict(message)
    assert hasattr(a2a_pb2_grpc, "A2AServiceServicer")


def test_either_import_order_works_in_a_fresh_interpreter() -> None:
    """The SDK first, then ours: the default pool already holds a2a.proto."""
    code = (
        "from a2a.types import a2a_pb2\n"
        "from agent_cards.bindings.grpc import a2a_pb2 as ours\n"
        "print(ours.Task.DESCRIPTOR.full_name)\n"
    )
    done = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True)
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "lf.a2a.v1.Task"
