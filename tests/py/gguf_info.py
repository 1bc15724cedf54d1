"""Parser for `kvbench info` output (format: docs/GGUF.md) and a comparison of
it with what PyPI's gguf.GGUFReader reads from the same file, plus a parser
for the hidden `--dump-tensor` output. Shared by the test_gguf*.py files."""
import re

import numpy as np
import gguf

VT = gguf.GGUFValueType
TYPE_NAMES = {VT.UINT8: "u8", VT.INT8: "i8", VT.UINT16: "u16", VT.INT16: "i16", VT.UINT32: "u32",
              VT.INT32: "i32", VT.FLOAT32: "f32", VT.BOOL: "bool", VT.STRING: "string",
              VT.ARRAY: "array", VT.UINT64: "u64", VT.INT64: "i64", VT.FLOAT64: "f64"}
STR_MAX, ARR_MAX = 120, 8  # as printed by gguf_print

_ESC = re.compile(rb'\\(x[0-9a-f]{2}|.)')


def unescape(b):
    """Printed bytes of a key, name or string back to raw bytes."""
    def rep(m):
        e = m.group(1)
        if e.startswith(b"x") and len(e) == 3:
            return bytes([int(e[1:], 16)])
        return {b"n": b"\n", b"t": b"\t", b"r": b"\r"}.get(e, e)
    return _ESC.sub(rep, b)


def _parse_string(s, i):
    """s[i] == '"': returns (raw bytes, total length or None if complete, next index)."""
    assert s[i:i + 1] == b'"'
    j = i + 1
    while s[j:j + 1] != b'"':
        j += 2 if s[j:j + 1] == b"\\" else 1
    raw = unescape(s[i + 1:j])
    j += 1
    m = re.match(rb"\.\.\. \((\d+) bytes\)", s[j:])
    if m:
        return raw, int(m.group(1)), j + m.end()
    return raw, None, j


def _parse_elements(s):
    """'[a, b, ...]' -> (elements, truncated). Strings come back as
    (bytes, full_len or None); others as their printed bytes."""
    assert s.startswith(b"[") and s.endswith(b"]"), s[:40]
    s = s[1:-1]
    out, i, truncated = [], 0, False
    while i < len(s):
        if s[i:i + 3] == b"...":
            truncated = True
            break
        if s[i:i + 1] == b'"':
            raw, full, i = _parse_string(s, i)
            out.append((raw, full))
        else:
            j = s.find(b", ", i)
            j = len(s) if j < 0 else j
            out.append(s[i:j])
            i = j
        if s[i:i + 2] == b", ":
            i += 2
    return out, truncated


def parse_info(out):
    """stdout bytes of `kvbench info` -> dict(header=..., kv=[...], tensors=[...], footer=...)."""
    info = {"header": {}, "kv": [], "tensors": [], "footer": {}}
    for line in out.split(b"\n"):
        if not line:
            continue
        m = re.match(rb"(file|file_size|version|tensor_count|kv_count|alignment|data_offset): (.*)$", line)
        if m:
            k = m.group(1).decode()
            info["header"][k] = m.group(2) if k == "file" else int(m.group(2))
            continue
        m = re.match(rb"(tensor_types|tensor_bytes): ?(.*)$", line)
        if m:
            info["footer"][m.group(1).decode()] = m.group(2).decode()
            continue
        m = re.match(rb"kv (\d+) (\S+) (.*)$", line)
        if m:
            idx, key, rest = int(m.group(1)), unescape(m.group(2)), m.group(3)
            am = re.match(rb"array\[(\w+)\] n=(\d+) (\[.*\])$", rest)
            if am:
                elems, trunc = _parse_elements(am.group(3))
                info["kv"].append(dict(index=idx, key=key, type="array", elem_type=am.group(1).decode(),
                                       n=int(am.group(2)), elems=elems, truncated=trunc))
            else:
                t, _, v = rest.partition(b" ")
                t = t.decode()
                if t == "string":
                    raw, full, end = _parse_string(v, 0)
                    assert end == len(v), line
                    val = (raw, full)
                else:
                    val = v
                info["kv"].append(dict(index=idx, key=key, type=t, value=val))
            continue
        m = re.match(rb"tensor (\d+) (\S+) (\S+) ([\dx]+) offset=(\d+) bytes=(\d+)$", line)
        if m:
            info["tensors"].append(dict(index=int(m.group(1)), name=unescape(m.group(2)).decode(),
                                        type=m.group(3).decode(),
                                        shape=[int(x) for x in m.group(4).split(b"x")],
                                        offset=int(m.group(5)), bytes=int(m.group(6))))
            continue
        raise AssertionError(f"unexpected line in kvbench info output: {line[:120]!r}")
    return info


def _scalar_matches(printed, vtype, value):
    if vtype == VT.BOOL:
        return printed == (b"true" if value else b"false")
    if vtype == VT.FLOAT32:
        return np.float32(float(printed)) == np.float32(value)
    if vtype == VT.FLOAT64:
        return float(printed) == float(value)
    return int(printed) == int(value)


def _check_string(printed, raw):
    got, full = printed
    if len(raw) > STR_MAX:
        assert full == len(raw) and got == raw[:STR_MAX], (got[:40], full, len(raw))
    else:
        assert full is None and got == raw, (got, raw)


def compare_with_reader(info, path):
    """Asserts that the parsed `kvbench info` output agrees with GGUFReader."""
    r = gguf.GGUFReader(path)
    h = info["header"]
    fields = [f for f in r.fields.values() if not f.name.startswith("GGUF.")]
    assert h["version"] == int(r.fields["GGUF.version"].parts[-1][0])
    assert h["tensor_count"] == len(r.tensors) == len(info["tensors"])
    assert h["kv_count"] == len(fields) == len(info["kv"])
    assert h["data_offset"] == r.data_offset
    align = r.fields.get("general.alignment")
    assert h["alignment"] == (int(align.parts[-1][0]) if align else 32)
    for f, kv in zip(fields, info["kv"]):
        assert kv["key"] == f.name.encode(), (kv["key"], f.name)
        vtype = f.types[0]
        assert kv["type"] == TYPE_NAMES[vtype], (f.name, kv["type"], vtype)
        if vtype == VT.ARRAY:
            etype = f.types[1] if len(f.types) > 1 else None
            assert kv["elem_type"] == TYPE_NAMES[etype], f.name
            assert kv["n"] == len(f.data), f.name
            shown = min(len(f.data), ARR_MAX)
            assert len(kv["elems"]) == shown and kv["truncated"] == (len(f.data) > ARR_MAX), f.name
            for i in range(shown):
                part = f.parts[f.data[i]]
                if etype == VT.STRING:
                    _check_string(kv["elems"][i], bytes(part))
                elif etype != VT.ARRAY:
                    assert _scalar_matches(kv["elems"][i], etype, part[0]), (f.name, i)
        elif vtype == VT.STRING:
            _check_string(kv["value"], bytes(f.parts[f.data[0]]))
        else:
            assert _scalar_matches(kv["value"], vtype, f.parts[f.data[0]][0]), (f.name, kv["value"])
    for t, ti in zip(r.tensors, info["tensors"]):
        assert ti["name"] == t.name
        assert ti["type"] == t.tensor_type.name, (t.name, ti["type"], t.tensor_type.name)
        assert ti["shape"] == [int(x) for x in t.shape], t.name
        assert ti["offset"] == t.data_offset - r.data_offset, t.name
        assert ti["bytes"] == t.n_bytes, t.name
    return r


def parse_dump(out):
    """`kvbench info --dump-tensor` stdout -> {row: float32 array}."""
    rows = {}
    for line in out.decode().splitlines():
        parts = line.split()
        assert parts[0] == "row", line[:80]
        rows[int(parts[1])] = np.array([float(x) for x in parts[2:]], dtype=np.float64).astype(np.float32)
    return rows


def reference_rows(reader_tensor, r0, r1):
    """Rows r0..r1-1 of a tensor dequantised by gguf.quants, as (rows, ne0) float32."""
    t = reader_tensor
    a = gguf.quants.dequantize(t.data, t.tensor_type)
    a = np.asarray(a, dtype=np.float32).reshape(-1, int(t.shape[0]))
    return a[r0:r1]
