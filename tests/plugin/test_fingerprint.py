"""The pod fingerprint against the Go package's own test vector and values its Sign() printed, and the XXH64 it
is built on against xxHash's published vectors and values Go's xxhash package gave for full 64-bit seeds."""

from __future__ import annotations

import base64
import random
import zlib

import pytest
import xxhash
from numa_align.api import podresources_v1_pb2 as pb
from numa_align.fingerprint import (
    ATTRIBUTE,
    ATTRIBUTE_METHOD,
    METHOD_ALL,
    METHOD_WITH_EXCLUSIVE_RESOURCES,
    fingerprint_pods,
    pod_fingerprint,
)

# github.com/k8stopologyawareschedwg/podfingerprint testdata/pods.json (v0.2.2, 259 pods of an OpenShift
# node) as "namespace name" lines, zlib-compressed; podfingerprint_test.go TestCheck expects
# "pfp0v001e477a4e3b2fc0ec6" for this set ("precomputed and validated manually").
GO_TESTDATA_PODS = (
    "eNq1W/92oywQ/f97ir4Ae7qWn48jIGoUNEDU9ek/TNvEpJqosWfPnka49zqDMDMkaE46tomrTlYk7s2Mr4CojLdVWSYW6NjEafiL"
    "KYeIQQ4hELQoyX9mnl/ViY19ZUFb2WLgtvxg1hBS47W/I7gkWCVj+w84kSXyNBiHsVScSykIoDwl5X9ByLgsVx7Ede4S2wTQt/jb"
    "o06AFKWYEcIQMLKx/ZTU25WHKZOQcKQEYDorVsAPB1yz5fBGllkxhp98lhifi9jnlbk6N9MOCJcYM8qgAqmHop6VequGa3DtxlRR"
    "JQRHBBxUlOltzLRtD5uYDcKHMVOU1UlOzczLEIjy5HxoeIoERHEkIBVUggh3mv+8jU3kYGZcjuVnegAmYWkoSZAAfVu06Y3cp006"
    "FllukvC0a1sND/u+ASBGIJGIAa2amk5ImEomwJ9MbtKfPk91AiSVUkhhyAHtdW+XiobrRAKCtO7XUUpb2m4dpVZakXWULpJHtZIi"
    "+shMUFys6zIEvB/jed8BEBaYYU4ZB4VVNZwSC7gwzybE7joARgpiwYkkIDu4g14k5nLgTFy7rPLjyU1DZA5zmcMQiTyN0p20XCq6"
    "l+y6LjYiKR2mNgQE171ZLdomPKuqAlCooICScAGiQyHIHkJ9U9CpxRZWpBsC1N31aD6EAKKgDP+BKXUkxhqVUXk6lXfuekBIqRxL"
    "rAiAdS3hrYaryrEjdw1hLJGSYVwFBrorZP2TfOEQyhUO/2SYu82hL5ZBW9MbPgGVVWvKKpYuPNkQSDmCHAHfUVcuBXc9Oqa34Nmg"
    "vggV8gYVAisaBsNmSJqH4m8TSsh4ilazeN8zt5p1aI83j0uaUQAaXwDMQ+ZGnHMVskLdN7ekM1YmKj6VPgxvcewf9NOQ8dSDftUb"
    "Tx70l8esQA/6fUvYvf45IA8VXDkkOOaPKnqI4KYuuocIwTHJHiOOvnl8F+89HiMSL+R1/G+uwqhSxBAe5lWIF1jf0T7RMhN1iAfg"
    "L4V/ypj/SUz6x5dN9CeUClns/4jqCY/RTbzoYx3veKrsSYP0FNuQ3SWVAnLJGCg40t06hq7hOoamddPcM3LjfHxeGnjLYFzpdMsz"
    "mKS/dvcVT+RKZ68Zz14znm0x3iZNfk6HtQ3l1cbxfyDCdrDkBXfYHu6wPdxZ+3RyPVQ/Nklz5+2/S/Vy2zzKL2GbycKei4TNIUtv"
    "Fuid0ufll1URgTDw3kHpjoKuIGH4HkgMCbmCRCgMpNqW6TPSxUGEQ8rkGDIF+pC3HhDPqUHEgJoIyucw3hjhn8MMYfUCmO+7o34O"
    "60olxnu3sL8JycyFLhMPvt9cAojwTXXxGO2yzjYT6Es+vG8AiCOKGQs7dKGaQ/aT+2ar0zDpLpWJVIQygsMki44uQqsYbSNv9loh"
    "cOVp5t3b94dxQRyKYRhqQCCPjo4r18LkgahsHKqxsGxC1SKMkv59ydqe46JN3HVx5QF/UUiZ5y+LJld+Fte26v5ttv8Hn712/7X2"
    "F0lSx2XeJHLTo/9BR1vpWwdwSoLRVyUWDuOJJ1Pfp860h82YlIIJEVYih2mkZqVGZcjfv2v9WqC0xb2xUrT2cS1RYnvZ9Kp3H7t5"
    "97Gbdx+7eQd38w7u5h3czTu0m3doN+/Qa97dRZOX/JvTYvvZtYePn7vkPT29U2R727jJ6/tNzTjWb/H5kR7b1759/I129jfa2d9o"
    "Z38/dvb3Y2d/P3b2F+7sL9zZX7izv2hnf9HO/m7KRI9+hHgGGL5wIIwITAQodGrS5+KjzLlp+ixVZHRnxZeGdKSIdvca/6biTuOI"
    "dxrHuRm5zwg8VWe/afvvjMzmYmv7Pdjv+/HaWN1Hzr1W0ANd9jv2rhiH6/GxiR+ZZxAAQyoxJUQhUHRZzWdFX43CU0Jof6Et4/Vq"
    "qH0ixHayaJNrszPgJT+fq7LfsHXfEdgcONdrs9+ze9OY7BIfF8mxXa1b4+zXianvA046Tz8j3m3x+xQ2/JYoEMYMsmAPbRbf6O0i"
    "RTiBQnEkBYC2IOMzGtfTkvnlR8345Csn4tswrZSkHAYRAImC9RMJHttEJ358lhMRyoRSiFOgD1lWziiMPo8SlQMKKoUJJQo0LGvx"
    "Avboa3MIhQxpBrBM9f0cdTD3AxCCcNhwcIaA5dS7x+jPHxZF6EiAUtyJ5XDdNpwth7f26OtF8PAEKp33n8eVKYJYIKEIBJo1hZlQ"
    "uD9Vd9c+qhY4p8MhYkWBoSnR67VknOhgVNQQ0m1mk6yX2WY2rSFMN7NNFDG+me0FoYf17OsPsYwwJJhUgDgnyXqlr68eacvacjPb"
    "atWrzexeRvr23rZIfF3GInkTifW5ypPrOTEHIIelm8NXWp9M7v+N8TRj3Qx+9HkUHYQMK0QqAUERKtE57megHzeBg+Hs+Bh+tSuK"
    "SHPjdxUMr2xu0rch0vrvXYiOcwPelwL/TgMvh+MvTeOjjwhxJTmRgGbHtJtWCJlDhRsNaDyMDcWghLX20+ivPBT7ENYSb3PhAGVY"
    "Dkd5SVhxacaneeeDGElXV3awNnKoRUuAqED6sARYY4zNImDHlFoCbHEtZmy8Nt6ORJhgFGMhBAPpgeJ2ml3bKhCy5ORALON6uFfI"
    "Q5xBSrkE5iBsuoV4JJg/JxbUzc25O9Tfp6hrwqcEckxC3QAOqovYNNMn5VApnN8uyRPjQ50gsaKYEw6I7UwxQ8tiUzlwPCU2Px9f"
    "DauYSoIAYzhFKzkCt+Imc59Kf3Jvn38AYse0nO0lDe/5bG8sZT7k4VAICZODujylYWcFoITQrSURXDuylnQMayVdS2pqZeRaUutE"
    "+sg8nbtzeTqqJ5CjnVlHkYZmch2l0/4BpYFdieZ7M4/muS3q1IT9JvHD63aXAPBd9WRFmi1G49Sl0WI0KzATi9HORvK4GN2pJh2f"
    "kvuGyTxOw3ryAXqhhkpVFODzzUJAMZIwZBtCQeTbqFml4WObJh6InkWHLcRDB2+y1WKiM/hgtxC9NpnYQuzl8QgniJdK6r4BhJws"
    "KGEQYoBK4sYnRT9f/Jt895FwFDghlwMqC2jWklKodL2W1BmbjndcFxfKXCXinyiT6wsdcdjFVKNKJRQPkCkUti5FoYhfqDIseuHD"
    "VrlS+fCi2XDSlaIQ5XXR0uIlEfYOqKkVe0UEvyOgainMMpGq1ONSFYXhwGzYgDFOFjpTx6IYNoZfD+fy3rFimFLIBQd9o0W2SuxL"
    "azCGYUGYBFmfKfGiho06NI7FVWPOX3HYsAAS9xYuz4Wmjs/FbVSmfDmaF8zAxWjviwN5jj7Xhoj1KluILWkXtUuxUqRmIVYXpbQL"
    "sb4kclwSDM8hF+cD0ZeIM9EGSCjnmBKYK0BL7I+TEmMmRkJhCRGHQIfZCv/7H87V7xQ="
)


SANITY_PRIME32 = 2654435761
SANITY_PRIME64 = 11400714785074694797


def sanity_buffer(length: int) -> bytes:
    """xxHash's own test buffer (Cyan4973/xxHash, xxhsum.c BMK_sanityCheck): the top byte of a 64-bit
    generator that starts at PRIME32 and is multiplied by PRIME64 after every byte."""
    generator, out = SANITY_PRIME32, bytearray()
    for _ in range(length):
        out.append(generator >> 56)
        generator = (generator * SANITY_PRIME64) & (2**64 - 1)
    return bytes(out)


def pattern(length: int) -> bytes:
    return bytes((i * 7 + 3) % 251 for i in range(length))


# Published by xxHash itself: xxhsum.c BMK_sanityCheck, BMK_testXXH64 rows (seed 0 and PRIME32).
@pytest.mark.parametrize(("length", "seed", "expected"), [
    (0, 0, 0xEF46DB3751D8E999),
    (0, SANITY_PRIME32, 0xAC75FDA2929B17EF),
    (1, 0, 0xE934A84ADB052768),
    (1, SANITY_PRIME32, 0x5014607643A9B4C3),
    (14, SANITY_PRIME32, 0xC3BD6BF63DEB6DF0),
    (222, 0, 0xB641AE8CB691C174),
    (222, SANITY_PRIME32, 0x20CB8AB7AE10C14A),
])
def test_xxh64_against_xxhashs_sanity_vectors(length: int, seed: int, expected: int) -> None:
    assert xxhash.xxh64_intdigest(sanity_buffer(length), seed=seed) == expected


# Seeds above 2**32, as a namespace's hash seeds its pods' (ChecksumString64S): the same value from
# github.com/OneOfOne/xxhash v1.2.8, the Go package podfingerprint uses.
@pytest.mark.parametrize(("length", "seed", "expected"), [
    (33, 2**64 - 1, 0xDBBAC9766BB3ADF7),
    (64, 2**64 - 1, 0xEB79AD1AD53520CB),
    (1000, 2**64 - 1, 0x41FA99962F100C5A),
])
def test_xxh64_takes_a_full_64_bit_seed_as_go_does(length: int, seed: int, expected: int) -> None:
    assert xxhash.xxh64_intdigest(pattern(length), seed=seed) == expected


def go_testdata_pods() -> list[tuple[str, str]]:
    text = zlib.decompress(base64.b64decode("".join(GO_TESTDATA_PODS))).decode()
    return [tuple(line.split(" ")) for line in text.splitlines()]  # type: ignore[misc]


def test_the_go_repositorys_test_vector() -> None:
    pods = go_testdata_pods()
    assert len(pods) == len(set(pods)) == 259
    assert pod_fingerprint(pods) == "pfp0v001e477a4e3b2fc0ec6"


def test_order_does_not_matter() -> None:
    pods = go_testdata_pods()
    random.Random(7).shuffle(pods)
    assert pod_fingerprint(reversed(pods)) == pod_fingerprint(iter(pods)) == "pfp0v001e477a4e3b2fc0ec6"


def test_empty_set_is_the_hash_of_no_bytes() -> None:
    assert pod_fingerprint([]) == "pfp0v001ef46db3751d8e999"


# Printed by Fingerprint.Sign() of podfingerprint v0.2.2 built with Go 1.26 on amd64 (its "unsafe" xxhash
# backend, the one amd64 and arm64 schedulers run).
@pytest.mark.parametrize(("pods", "expected"), [
    ([("default", "pod-a")], "pfp0v0019131e707ccadb65c"),
    ([("kube-system", "coredns-1"), ("default", "pod-a")], "pfp0v001ccbfc86ce2630dd7"),
    ([("default", "pod-a"), ("default", "pod-b"), ("kube-system", "coredns-1"), ("numa", "pinned-0")],
     "pfp0v0019df82f143757f53b"),  # 32 bytes hashed: exactly one stripe
    ([("default", "pod-a"), ("default", "pod-b"), ("kube-system", "coredns-1"), ("numa", "pinned-0"),
      ("numa", "pinned-1")], "pfp0v0011459524c5a8ad9d7"),
    ([("", "x")], "pfp0v001eccb3ab08f12a28f"),
    ([("x", "")], "pfp0v001b2272d5ce2a421d6"),
    ([("nämespace", "pod-ü")], "pfp0v0013319b428a1d9faef"),  # UTF-8, as Go strings hold it
])
def test_values_the_go_package_signed(pods: list[tuple[str, str]], expected: str) -> None:
    assert pod_fingerprint(pods) == expected


def test_namespace_and_name_are_not_concatenated() -> None:
    assert pod_fingerprint([("ns", "name")]) == "pfp0v001601d4692e9e9c3bf"
    assert pod_fingerprint([("nsn", "ame")]) == "pfp0v0012ced3c6d2d556a34"


def test_a_pod_given_twice_counts_twice_as_in_go() -> None:
    assert pod_fingerprint([("a", "b")]) == "pfp0v001b62c44d557501be8"
    assert pod_fingerprint([("a", "b"), ("a", "b")]) == "pfp0v0015a0007ca4c8b2639"


def test_attribute_names_and_methods() -> None:
    assert (ATTRIBUTE, ATTRIBUTE_METHOD) == ("nodeTopologyPodsFingerprint", "nodeTopologyPodsFingerprintMethod")
    assert (METHOD_ALL, METHOD_WITH_EXCLUSIVE_RESOURCES) == ("all", "with-exclusive-resources")


def _pod(namespace: str, name: str, **container: object) -> pb.PodResources:
    return pb.PodResources(namespace=namespace, name=name, containers=[pb.ContainerResources(name="c", **container)])


def _numa(*ids: int) -> pb.TopologyInfo:
    return pb.TopologyInfo(nodes=[pb.NUMANode(ID=i) for i in ids])


LISTED = [
    _pod("a", "shared"),
    _pod("a", "pinned", cpu_ids=[2, 3]),
    _pod("b", "memory", memory=[pb.ContainerMemory(memory_type="memory", size=1 << 30, topology=_numa(1))]),
    _pod("b", "numa-dev", devices=[pb.ContainerDevices(resource_name="numa-align/numa-0", device_ids=["numa-0-1"],
                                                       topology=_numa(0))]),
    _pod("c", "gpu", devices=[pb.ContainerDevices(resource_name="vendor/gpu", device_ids=["g0"], topology=_numa(1))]),
    _pod("c", "no-locality", devices=[pb.ContainerDevices(resource_name="vendor/nic", device_ids=["n0"],
                                                          topology=_numa(-1))]),
]


def test_method_all_takes_every_listed_pod() -> None:
    assert len(fingerprint_pods(LISTED, METHOD_ALL)) == len(LISTED)


def test_exclusive_method_takes_pods_holding_numa_bound_resources() -> None:
    assert fingerprint_pods(LISTED, METHOD_WITH_EXCLUSIVE_RESOURCES) == [
        ("a", "pinned"), ("b", "memory"), ("b", "numa-dev"), ("c", "gpu")]
    published = {"cpu", "memory", "numa-align/numa-0"}
    assert fingerprint_pods(LISTED, METHOD_WITH_EXCLUSIVE_RESOURCES, published) == [
        ("a", "pinned"), ("b", "memory"), ("b", "numa-dev")]


def test_unknown_method_is_refused() -> None:
    with pytest.raises(ValueError, match="'exclusive'"):
        fingerprint_pods(LISTED, "exclusive")
