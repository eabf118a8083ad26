#!/bin/sh
# Run job-qemu-example.yaml with lava-run on a local QEMU device (TCG): the
# whole procedure, from lava-server's templates to the job's log.
#
# Usage: run_example.sh ok|panic|panic-exit|probe CACHE_DIR KERNEL RAMDISK OUT_DIR
#
#   ok          the suite runs: console=ttyS0 panic=0 quiet bootbench.accel=tcg
#   panic       the same plus rdinit=/nonexistent: the kernel panics before
#               the init (no root fs) and, with panic=0, hangs; LAVA only
#               notices when the test action's timeout (1 minute) runs out
#   panic-exit  the same with panic=-1: the kernel reboots, which -no-reboot
#               (in the device's options) turns into QEMU exiting at once
#   probe       job-probe.yaml on a device whose QEMU is fake_qemu.py: the
#               log's format, in a second (KERNEL and RAMDISK: any files)
#
# CACHE_DIR holds lava-server's unpacked templates (unpack_server_templates.sh).
# KERNEL and RAMDISK are absolute paths (a Debian x86_64 kernel and
# `bootbench image --suite quick -o RAMDISK`). OUT_DIR receives device.yaml,
# job.yaml, job.log (lava-run's log, from its stderr), time.txt and lava-run's
# own output directory (result.yaml, description.yaml).
#
# lava-run uses /var/lib/lava/dispatcher/tmp/<job id>/ and deletes it at the
# end, so concurrent runs need different job ids: this script uses its PID.
# LAVA's python is /usr/bin/python3, whatever python3 comes first in PATH.
set -eu

if [ $# -ne 5 ]; then
    echo "usage: $0 ok|panic|panic-exit|probe CACHE_DIR KERNEL RAMDISK OUT_DIR" >&2
    exit 2
fi
variant=$1 cache=$2 kernel=$3 ramdisk=$4 out=$5
here=$(cd "$(dirname "$0")" && pwd)
append="console=ttyS0 panic=0 quiet bootbench.accel=tcg"
case $variant in
ok) name="bootbench quick suite on a local qemu device" job=15 boot=2 test=10 silence=120 ;;
panic)
    name="bootbench kernel that panics before the init"
    append="$append rdinit=/nonexistent" job=3 boot=1 test=1 silence=60
    ;;
panic-exit)
    name="bootbench kernel that panics before the init, QEMU exits"
    append="console=ttyS0 panic=-1 quiet bootbench.accel=tcg rdinit=/nonexistent" job=3 boot=1 test=1 silence=60
    ;;
probe) name="" job=2 boot=1 test=1 silence=30 ;;
*)
    echo "$0: unknown variant '$variant' (ok, panic, panic-exit or probe)" >&2
    exit 2
    ;;
esac

mkdir -p "$out"
templates=$("$here/unpack_server_templates.sh" "$cache")
job_file=$here/job-qemu-example.yaml
if [ "$variant" = probe ]; then
    /usr/bin/python3 "$here/render_device.py" "$templates" amd64 "$out/device.yaml" --command "$here/fake_qemu.py"
    job_file=$here/job-probe.yaml
else
    /usr/bin/python3 "$here/render_device.py" "$templates" amd64 "$out/device.yaml"
fi
sed -e "s|@JOB_NAME@|$name|" -e "s|@KERNEL@|$kernel|" -e "s|@RAMDISK@|$ramdisk|" \
    -e "s|@APPEND@|$append|" -e "s|@JOB_MINUTES@|$job|" -e "s|@BOOT_MINUTES@|$boot|g" \
    -e "s|@TEST_MINUTES@|$test|" -e "s|@SILENCE_SECONDS@|$silence|" \
    "$job_file" >"$out/job.yaml"
/usr/bin/python3 -c 'from lava_common.schemas import validate; import yaml,sys; validate(yaml.safe_load(open(sys.argv[1])), strict=True)' "$out/job.yaml"
rm -rf "$out/lava"
lava-run --job-id $$ --output-dir "$out/lava" --device "$out/device.yaml" --validate "$out/job.yaml" 2>"$out/validate.log"
rm -rf "$out/lava"
start=$(date +%s.%N)
status=0
lava-run --job-id $$ --output-dir "$out/lava" --device "$out/device.yaml" "$out/job.yaml" 2>"$out/job.log" || status=$?
end=$(date +%s.%N)
echo "lava-run exit $status, wall $(echo "$end - $start" | bc) s" | tee "$out/time.txt"
cat "$out/lava/result.yaml"
