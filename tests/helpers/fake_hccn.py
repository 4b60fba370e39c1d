"""A fake `hccn_tool` that prints what the driver's prints (hicann/driver src/custom/network/hccn: tool_ops.c,
tool_ops_ext.c, cmd.c, ds_net_ext.c) for NPUs described in a JSON file beside it, and whose `-ping` really
pings: ICMP echo from the NPU's address to the peer's, so inside network namespaces joined by veth pairs the
packets go where a RoCE ping's would, and stay there.

The state file: {"npus": {"0": {"link": "UP", "ip": "10.232.0.11", "netmask": "255.255.255.0",
"health": "Success", "tls": 0}}, "old": false, "hang": false}. `old` prints the older driver's words
(`Socket failed`); `hang` is a wedged driver: every call sleeps."""

from __future__ import annotations

import json
import sys
from pathlib import Path
from typing import Any, Dict

SCRIPT = r'''#!{python}
import json, os, socket, struct, sys, time

STATE = json.load(open({state!r}))
if STATE.get("hang"):
    time.sleep(3600)


def arg(name):
    return sys.argv[sys.argv.index(name) + 1] if name in sys.argv else None


def checksum(data):
    if len(data) % 2:
        data += b"\0"
    total = sum(struct.unpack("!%dH" % (len(data) // 2), data))
    total = (total >> 16) + (total & 0xFFFF)
    total += total >> 16
    return ~total & 0xFFFF


def ping(npu, dst, count):
    print("device %s PING %s" % (npu["id"], dst))
    received = 0
    try:
        sock = socket.socket(socket.AF_INET, socket.SOCK_RAW, socket.IPPROTO_ICMP)
        sock.bind((npu["ip"], 0))
    except OSError as exc:
        print("ping failed: %s" % exc)
        return 1
    ident = os.getpid() & 0xFFFF
    for seq in range(count):
        body = b"hccn-fake-ping!!" * 4
        head = struct.pack("!BBHHH", 8, 0, 0, ident, seq)
        head = struct.pack("!BBHHH", 8, 0, checksum(head + body), ident, seq)
        start = time.monotonic()
        got = False
        if npu.get("link") == "UP":
            sock.sendto(head + body, (dst, 0))
            while not got and time.monotonic() - start < 0.5:
                sock.settimeout(max(0.01, 0.5 - (time.monotonic() - start)))
                try:
                    packet, peer = sock.recvfrom(2048)
                except socket.timeout:
                    break
                ihl = (packet[0] & 0x0F) * 4
                kind, _, _, pid, pseq = struct.unpack("!BBHHH", packet[ihl:ihl + 8])
                got = kind == 0 and pid == ident and pseq == seq and peer[0] == dst
        if got:
            received += 1
            print("recv seq=%d,time=%.6fms" % (seq, (time.monotonic() - start) * 1000))
        else:
            print("recv time out seq=%d" % seq)
    loss = 100.0 * (count - received) / count
    print("%d packets transmitted, %d received, %.2f%% packet loss" % (count, received, loss))
    return 0 if received == count else 1


def main():
    npu_id = arg("-i")
    npu = dict(STATE["npus"].get(npu_id or "", {{}}), id=npu_id)
    if not npu_id or npu_id not in STATE["npus"]:
        print("Invalid device id [%s]" % npu_id)
        return 1
    if "-ping" in sys.argv:
        return ping(npu, arg("address"), int(arg("pkt") or 3))
    if "-link" in sys.argv:
        print("link status: %s" % npu.get("link", "UP"))
    elif "-net_health" in sys.argv:
        health = npu.get("health", "Success")
        print("net health status: %s" % ("Socket failed" if STATE.get("old") and health == "Socket fail" else health))
    elif "-ip" in sys.argv:
        if not npu.get("ip"):
            print("Get ipconf failed, because no ip was preset there!")
            return 1
        print("ipaddr:%s\nnetmask:%s" % (npu["ip"], npu.get("netmask", "255.255.255.0")))
    elif "-tls" in sys.argv:
        print("dev_id:%s, tls switch[%d](0:disable, 1:enable), tls preconfigured[1](0:non-preset, 1:preset), "
              "tls alarm time threshold[60]days" % (npu_id, npu.get("tls", 0)))
    else:
        print("Invalid command")
        return 1
    return 0


sys.exit(main())
'''


def write_fake_hccn_tool(bin_dir: Path, state: Dict[str, Any], python: str = sys.executable) -> Path:
    """`bin_dir/hccn_tool` over `bin_dir/hccn_state.json` (rewrite the JSON to change a card)."""
    bin_dir.mkdir(parents=True, exist_ok=True)
    state_file = bin_dir / "hccn_state.json"
    state_file.write_text(json.dumps(state))
    tool = bin_dir / "hccn_tool"
    tool.write_text(
        SCRIPT.replace("{python}", python).replace("{state!r}", repr(str(state_file))).replace("{{}}", "{}")
    )
    tool.chmod(0o755)
    return tool
