#!/usr/bin/python3
"""Check that bootbench's console protocol survives a lava-run log.

Usage: check_log.py LOG

Decodes each line of the log as YAML, keeps the console lines (`target`
and `feedback`: lines read after the monitor's end string are logged as
feedback), undoes LAVA's escaping of `"` as `\\"`, then checks every
`@@BOOTBENCH` line's CRC32 and rebuilds every stream against its header's
sha256 and length. Prints one summary line; exits 1 when a line or stream
is damaged. A reference for the importer, not the importer.
"""
import sys, yaml, zlib, hashlib, re, collections
lines = open(sys.argv[1], encoding="utf-8").read().split("\n")
target = []
for l in lines:
    if not l: continue
    d = yaml.load(l, Loader=yaml.CSafeLoader)
    if d["lvl"] in ("target", "feedback"):
        target.append(d["msg"])
raw_esc = sum('\\"' in t for t in target)
un = [t.replace('\\"', '"') for t in target]
ok = bad = 0; heads = {}; chunks = collections.defaultdict(dict); events = []
for t in un:
    i = t.find("@@BOOTBENCH ")
    if i < 0: continue
    body = t[i+len("@@BOOTBENCH "):]
    f = body.split(" ")
    if f[0] == "EVENT":
        m = re.match(r"(EVENT .*) crc=([0-9a-f]{8})$", body)
        good = m and "%08x" % zlib.crc32(m.group(1).encode()) == m.group(2)
        events.append((f[1], bool(good)))
        ok += bool(good); bad += not good
    elif f[0] == "HEAD":
        kind,total,nbytes,sha,crc = f[1:6]; bid = " ".join(f[6:])
        covered = " ".join(["HEAD",kind,total,nbytes,sha,bid])
        good = "%08x" % zlib.crc32(covered.encode()) == crc
        ok += good; bad += not good
        heads[(kind, sha[:8])] = (int(total), int(nbytes), sha)
    elif f[0] in ("W", "R") and len(body.split(" ", 4)) == 5:
        kind, tag, seq, crc = f[0:4]; payload = body.split(" ", 4)[4]
        covered = " ".join([kind, tag, seq, payload])
        good = "%08x" % zlib.crc32(covered.encode()) == crc
        ok += good; bad += not good
        if good: chunks[(kind, tag)][int(seq.split("/")[0])] = payload
docs = 0
for k, (total, nbytes, sha) in heads.items():
    c = chunks[k]
    doc = "".join(c[i] for i in range(1, total+1) if i in c)
    if len(c) == total and hashlib.sha256(doc.encode()).hexdigest() == sha and len(doc.encode()) == nbytes:
        docs += 1
    else:
        print("BROKEN stream", k, len(c), total)
print(f"console lines {len(target)}, with escaped quote {raw_esc}; protocol lines crc ok {ok} bad {bad}; streams {len(heads)} rebuilt {docs}; events {events}")
sys.exit(1 if bad or docs != len(heads) else 0)
