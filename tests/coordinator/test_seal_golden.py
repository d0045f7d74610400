"""Golden hashes: fixed records, sealed one after another into a chain, give the hashes
they gave before the canonical form was made faster (issue 34). A change that moves one
byte of a sealed record (key order, an escape, a number's spelling, redaction) fails
here by name, whatever the other tests compare it with."""

from __future__ import annotations

import json
from typing import Any

from coordinator.audit.log.events import GENESIS_HASH, prepared, seal
from tests.coordinator.test_seal_once import BASE, CORRELATION, DATA

EXTRA: dict[str, dict[str, Any]] = {
    "keys-past-the-bmp": {"\ue000": 1, "\U0001f600": [2], "z": {"\uffff": None}},
    "controls": {"text": "\x00\x01\b\t\n\x0b\f\r\x1f\\/", "list": [[], {}, [{}]]},
    "limits": {"max": 2**53 - 1, "min": -(2**53) + 1, "zero": -0},
}
ALL = {**DATA, **EXTRA}
# Each event's hash, sealed in this order (seq 1 onwards, after the genesis hash): the
# data cases by name, each with the correlation cases by name (all-null, all-set,
# trace-id-looks-like-a-key).
GOLDEN: dict[str, tuple[str, ...]] = {
    "bearer": (
        "685b75197d948454d4f468d14253e8a2dae333edcc0e7bd6f2abf9acf61a9a36",
        "c1d815463d5a09abb0ebcbe221d2043f8f16e44a44d952785673138874a34526",
        "150a930b8742876f24bdbefaffefa71c2e932117c640d5a58ab6b12c8c8f78d4",
    ),
    "controls": (
        "d64840bcaf2de606c433270b3b903dc648f0a3a1450e339aed525fcf1d130a8a",
        "1b0245e39d01146e72acb1f9b366dfe2c5feb950e5ad81067f87d20031d8d6e6",
        "7488af8fb47a23401ad61028209caaecde07857a0f023557ca5d2114608df058",
    ),
    "counts": (
        "71356e003443382b8d3f9e119e92ac14a8f603e4ac3e748879ce8444d4f2a6a0",
        "db841b7203aa34558ce9ca7f9c7957e1d8c065ed106a57dd45740d5169278cb0",
        "082bbc11d08da5a87c27f6e0385d27320e307f71d8f6cfdd79b8ed112dcbd0af",
    ),
    "del": (
        "6f5e75fe3bbf5e13b81d988be187a1a701046e1a4dfb147da7c61761f769f8c2",
        "449eadd3af8c4931b4b344621897d358f9f911a82d49b3db6be0ff6e754a40b4",
        "d77092f01224f1a975ddecf65f5672199c955df6a6e5b04d5f097076d648e807",
    ),
    "empty": (
        "b080444c1399de4a22f9e3077ffd76edb37591d117c4c8d3beb865260bc7c49f",
        "69f40088033041fd41cca29e9bddb1dadfc9ecf777a7e9ff5a3d21a4dd626b76",
        "76df46af81d4b7b641f0b451daf8009e4012cdb0e754aa560a409d24bca3fc44",
    ),
    "float": (
        "e599a3e1ba15c35bdf0c8efcbf342112fdd5c238d78be8a1782f97663f0c51e3",
        "c824072747da2d972febc1d21d75c131feb23657193b6ba17946a92f50563bb3",
        "1c8cfcb38250556f87238891e4b15d22822ca5fc2252da9b437d2b84a7f4e5bb",
    ),
    "jws-parts": (
        "7a45130f2cdeffb8b68014d8b91401c51bf7c823ada92747bed58fd315acabde",
        "64cc1ad84980a2a1db633b55b1b0bbdea1a25d4cbc52acaddaf8c47a6ddf5f6a",
        "d0cc8b32bd06b4b0d0fd50d8f5a7846d048c5c6f6fa638a2dd60e187fbd87eaa",
    ),
    "jwt": (
        "539b051b7ab409734702da56e2af0024033dcad2545e0d79256c7eea640c404e",
        "7f4e588041d584c5d588e0c04f2c803878dc2ca34d6db5b972361bc1e150bb55",
        "f130568b464278d5511a6900931fa909311c0745192c1defaf2bf37c7894770f",
    ),
    "keys-past-the-bmp": (
        "a889879be18b5087ec3334ed8ed7ef23caf9adab0df0cd098d760868414907a0",
        "3e8f633430e1d0207438490a15071c1fb407d8d18a4b558590820d2eef15bb1a",
        "ebcd6dda1b9e36f8741e3d22e571f8137372c2620d76651877f33042f85873f0",
    ),
    "limits": (
        "d623110e94acb4dcb35891e41f421b5ac3ab19ab5748113be16720adffed8e54",
        "ced73c6fd7c0ab42c96c90a66c891ad82212ea1fe589676de4dc78d197be729d",
        "b227a7b30a6c600000da5eec60f70d73191747afed3486881cc35af273424f97",
    ),
    "names-in-values": (
        "c7ac66ea101ad10f56792bc6ecab0e0a3359c938ee01448111a16b5d93e3e3ad",
        "fead57d9c5c4299316c9860b5815605db1a7d7ea8568093e971e1d694b22aa9f",
        "f74119b2f3363c8a523e1dfcb0bd394b7e433f9e3802675a6cdbefb24a9c0e8d",
    ),
    "nested-same-names": (
        "656a66eb9dc15c62ee20bf5a4117f571be162b3c97e5ab5005e41a15da267fff",
        "3f2fd6585f2e1491e0c99ebdc5e1803d4694ceefaf1c373035f6df1c3a0b321b",
        "db5dcf30e23d70c8fc24cbeed9f9b3e2e5e2d87619130f95dac2cd8c2f1d2282",
    ),
    "non-ascii": (
        "88860de74e8d0eed667424bc19bc1409771153067bd5eaadf68d9b1a402a31b9",
        "6fb9b27d48e04bd716bc4be32f5d70a504369348c2d32306c6b12955f08578f8",
        "33b53f7f634c6706b3cdbb2de3347ff237d79d1f000cf7e44a7fc1a254b09803",
    ),
    "plain": (
        "b97b2e777b932803fab2b8335a3ab34e6e98692d1dacd5b4efce662cf8614ac5",
        "5dd7302444d79983d2e96d8e3bb810aec92d2a987ebf592a49b79a040dbb29fa",
        "b25ca45f8f8f1f40090d0881b3ca86bb404206b1de5d7c744f0d2ac6002a1dc9",
    ),
    "quotes": (
        "2794f65e772d915c5cd3300d7ec93eb5c3d19003f56f8d6bd055dc0b84822d31",
        "6ae051455e476f138af022043ce64ee0abb8dd591d7c3a9ad35f5d112ad00300",
        "febbabb5ace854962ec8fe4c018c4170723b41cc1f06f3c2f300345c8e8a79e0",
    ),
    "secret-field": (
        "221e0b15030f8740cc7ec24bd4cc83eebfd6eebd61e4628d1be0a993236e4a2c",
        "998a317347af676743533be5f6d271c642e1bf7ae93a1728dee53934934a7cab",
        "6475745bb6fd9727cbb8153c12ee676353e89ffd55b244148104e315a8932cec",
    ),
}


def test_fixed_records_seal_to_the_same_hashes() -> None:
    assert sorted(GOLDEN) == sorted(ALL)  # every case, in the order sealed
    cases = [(data, correlation) for data in GOLDEN for correlation in sorted(CORRELATION)]
    expected = [digest for digests in GOLDEN.values() for digest in digests]
    prev_hash = GENESIS_HASH
    for seq, ((data, correlation), digest) in enumerate(zip(cases, expected, strict=True), 1):
        record = {**BASE, **CORRELATION[correlation], "data": ALL[data]}
        row = seal(prepared(json.loads(json.dumps(record))), seq, prev_hash)
        assert row["hash"] == digest, (data, correlation)
        prev_hash = row["hash"]
