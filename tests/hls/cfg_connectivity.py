"""Every kernel scripts/build_bitstreams.sh builds by default (each
kernels_hls/*.cpp) has, in every platform's kernels_hls/cfg/*.cfg, a compute
unit (nk=KERNEL:...) and a memory bank for each of its m_axi ports
(sp=CU.PORT:BANK). A kernel or a port missing there is linked to whatever
v++ picks, or not at all (topk_histogram had no connectivity on the U250
and U280). Exit 1 naming each gap.

  python3 cfg_connectivity.py KERNELS_HLS_DIR
"""
import re
import sys
from pathlib import Path


def m_axi_ports(source):
    return re.findall(r"#pragma\s+HLS\s+INTERFACE\s+m_axi\s+port\s*=\s*(\w+)", source)


def main():
    root = Path(sys.argv[1])
    kernels = {p.stem: m_axi_ports(p.read_text()) for p in sorted(root.glob("*.cpp"))}
    cfgs = sorted((root / "cfg").glob("*.cfg"))
    if not kernels or not cfgs:
        print(f"no kernels or no cfg files under {root}")
        return 1
    gaps = []
    for cfg in cfgs:
        text = cfg.read_text()
        units = dict(re.findall(r"^nk=(\w+):\d+:(\w+)", text, re.M))
        banked = set(re.findall(r"^sp=(\w+\.\w+):", text, re.M))
        for kernel, ports in kernels.items():
            if not ports:
                gaps.append(f"{kernel}: no m_axi port found in its source")
            if kernel not in units:
                gaps.append(f"{cfg.name}: no compute unit for {kernel} (nk={kernel}:...)")
                continue
            gaps += [f"{cfg.name}: {kernel}'s port {p} has no bank (sp={units[kernel]}.{p}:...)"
                     for p in ports if f"{units[kernel]}.{p}" not in banked]
    for g in gaps:
        print(g)
    if not gaps:
        print(f"{len(kernels)} kernels x {len(cfgs)} platforms: every m_axi port has a bank")
    return 1 if gaps else 0


if __name__ == "__main__":
    sys.exit(main())
