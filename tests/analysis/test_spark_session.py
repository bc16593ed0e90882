"""The local SparkSession keeps to loopback, like every other process of a run."""

import ipaddress

import psutil


def _is_loopback(ip: str) -> bool:
    address = ipaddress.ip_address(ip.split("%")[0])
    mapped = getattr(address, "ipv4_mapped", None)  # Java listens on IPv6 sockets
    return (mapped or address).is_loopback


def test_local_spark_listens_on_loopback_only(spark):
    assert spark.conf.get("spark.driver.host") == "127.0.0.1"
    assert spark.range(10).count() == 10  # the driver and its block manager are up
    jvms = [p for p in psutil.Process().children(recursive=True) if "java" in p.name()]
    assert jvms, "no JVM child of this test process"
    listening = [
        conn.laddr
        for jvm in jvms
        for conn in jvm.net_connections(kind="inet")
        if conn.status == psutil.CONN_LISTEN
    ]
    assert len(listening) >= 2, listening  # the driver's RPC and block-manager ports at least
    assert [a for a in listening if not _is_loopback(a.ip)] == []
