#!/usr/bin/env python3
"""Every kernels_cuda/*.cu file compiled to machine code for each required
architecture: reads the .nv_fatbin section of each object nvcc made and
lists its entries (PTX or cubin ELF, and the sm_ it is for).

    fatbin_archs.py --sources DIR --archs 80,90 OBJECT...

This machine kind has nvcc but no GPU, so the kernels never run in CI; this
test makes sure the build really produced code for the GPUs we target
(A100: sm_80, H100: sm_90) from every kernel file, instead of trusting the
build's flags. Exit 0: all present; 1: something missing (printed).
"""
import argparse
import struct
import sys
from pathlib import Path

FATBIN_MAGIC = 0xBA55ED50
KIND = {1: "ptx", 2: "cubin"}


def sections(elf):
    if elf[:4] != b"\x7fELF" or elf[4] != 2:
        raise ValueError("not a 64-bit ELF object")
    shoff, = struct.unpack_from("<Q", elf, 0x28)
    shentsize, shnum, shstrndx = struct.unpack_from("<HHH", elf, 0x3A)
    head = lambda i: struct.unpack_from("<IIQQQQIIQQ", elf, shoff + i * shentsize)  # noqa: E731
    names = head(shstrndx)[4]
    for i in range(shnum):
        h = head(i)
        name = elf[names + h[0]:elf.index(b"\0", names + h[0])].decode()
        yield name, h[4], h[5]


def fatbin_entries(elf):
    """(kind, sm) of every entry of the object's fatbinary."""
    out = []
    for name, off, size in sections(elf):
        if name != ".nv_fatbin":
            continue
        end = off + size
        while off + 16 <= end:
            magic, _, header, body = struct.unpack_from("<IHHQ", elf, off)
            if magic != FATBIN_MAGIC:
                break
            e, stop = off + header, off + header + body
            while e < stop:
                kind, _, entry_header, payload = struct.unpack_from("<HHIQ", elf, e)
                sm, = struct.unpack_from("<I", elf, e + 28)
                out.append((KIND.get(kind, str(kind)), sm))
                e += entry_header + payload
            off = stop
    return out


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--sources", required=True)
    ap.add_argument("--archs", required=True, help="comma list, e.g. 80,90")
    ap.add_argument("objects", nargs="+")
    a = ap.parse_args()
    a.archs = [int(x) for x in a.archs.split(",")]
    objects = {Path(o).name.split(".cu.")[0]: o for o in a.objects if ".cu." in Path(o).name}
    bad = []
    for cu in sorted(Path(a.sources).glob("*.cu")):
        if cu.stem not in objects:
            bad.append(f"{cu.name}: no object in the build")
            continue
        entries = fatbin_entries(Path(objects[cu.stem]).read_bytes())
        have = sorted({sm for kind, sm in entries if kind == "cubin"})
        missing = [sm for sm in a.archs if sm not in have]
        print(f"{cu.name}: cubin for sm_{', sm_'.join(map(str, have)) if have else '(none)'}; "
              f"{sum(1 for k, _ in entries if k == 'ptx')} PTX")
        if missing:
            bad.append(f"{cu.name}: no machine code for sm_{', sm_'.join(map(str, missing))}")
    for b in bad:
        print(b)
    return 1 if bad else 0


if __name__ == "__main__":
    sys.exit(main())
