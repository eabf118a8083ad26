#!/usr/bin/python3
"""A stand-in for qemu-system-x86_64 that prints a fixed console and exits.

It probes how lava-run logs console text, without booting anything:
double quotes and backslashes, a 5000-character line, a line written in
pieces, control characters, invalid UTF-8, U+2028, blank lines, metric
lines for a `monitors` pattern with a measurement, text after the end
string and a last line without its newline. Render a device with
`render_device.py --command PATH_OF_THIS_FILE` and run job-probe.yaml on it
(run_example.sh probe does both). QEMU's arguments are ignored.
"""

import sys
import time

OUT = sys.stdout.buffer


def out(data):
    OUT.write(data)
    OUT.flush()
    time.sleep(0.05)


out(b"junk before\r\n")
out(b"@@BOOTBENCH EVENT hello version=0 crc=339cb767\r\n")
out(b'quote "a" backslash \\ and \\" end\r\n')
out(b"long " + b"x" * 5000 + b" END\r\n")
out(b"split-start ")
out(b"y" * 3000)
out(b" split-end\r\n")
out(b"ctl bell\x07 tab\there nul\x00 esc\x1b[0m del\x7f\r\n")
out(b"bad utf8 \xff\xfe ok \xc3\xa9\r\n")
out(b"u2028 \xe2\x80\xa8 after\r\n")
out(b"blank follows\r\n\r\n\r\nafter blanks\r\n")
out(b"@@BOOTBENCH METRIC fork.fork_rate 178.93 forks/s\r\n")
out(b"@@BOOTBENCH METRIC dbench.throughput 31.5 MB/s\r\n")
out(b"@@BOOTBENCH METRIC Weird Name!x 1e3 us\r\n")
out(b"@@BOOTBENCH EVENT poweroff status=complete crc=3d6fc2ba\r\n")
out(b"after poweroff\r\nno newline at the end")
time.sleep(0.5)
