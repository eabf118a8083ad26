#!/usr/bin/python3
"""Render a LAVA device configuration for a local QEMU device (TCG).

`lava-run` takes a rendered device configuration (YAML), not a device
dictionary. This renders the `qemu` device-type template shipped in
lava-server's package the way the server does (Jinja2 sandbox,
`trim_blocks`, undefined variables empty), with the variables a local
bootbench device needs:

    no_kvm: True        no `-cpu host -enable-kvm` (guests run under TCG)
    arch                the job context's arch must also be in the
                        template's available_architectures (amd64, i386, ...)
    memory              `-m` in MiB (the template's default is 512)
    netdevice: user     `-net user` (the template's default, written out)
    extra_options       appended to QEMU's argv: the appliance's machine,
                        CPU model, vCPUs and `-no-reboot` (so that a kernel
                        which reboots makes QEMU exit instead of looping)

Usage:

    render_device.py TEMPLATES_DIR ARCH OUTPUT [--memory MIB] [--smp N]
                     [--cpu MODEL] [--machine TYPE] [--extra OPTION]...
                     [--command PATH]

TEMPLATES_DIR is the directory holding qemu.jinja2 and base.jinja2
(`unpack_server_templates.sh` prints it). ARCH is LAVA's name (amd64,
x86_64, i386, ppc64, ...). Each --extra is one QEMU option string such as
'-rtc base=utc'. --command replaces the QEMU binary the template names
(fake_qemu.py, to probe the log format without booting). Run it with /usr/bin/python3 (the one LAVA's packages and
python3-jinja2 belong to). The output is checked to parse as YAML and to
hold the qemu boot method's command.
"""

import argparse
import os
import sys

import jinja2
import jinja2.sandbox
import yaml

# Per LAVA arch: the QEMU machine and TCG CPU model bootbench boots with
# (qemu/src/arch.rs); None leaves the template's choice.
APPLIANCE_MACHINE = {
    "amd64": ("q35", "max"),
    "x86_64": ("q35", "max"),
    "i386": ("pc", "max"),
    "ppc64": ("pseries", None),
}


def render(templates_dir, arch, memory, smp, cpu, machine, extra, command=None):
    """Returns the rendered device configuration text."""
    if not os.path.isfile(os.path.join(templates_dir, "qemu.jinja2")):
        raise SystemExit(f"render_device: no qemu.jinja2 in {templates_dir}")
    default_machine, default_cpu = APPLIANCE_MACHINE.get(arch, (None, None))
    machine = machine or default_machine
    cpu = cpu or default_cpu
    options = []
    # The template itself passes -machine/-cpu for some arches (i386, ppc64,
    # arm); only add ours where it does not, so QEMU never sees two.
    if machine and arch not in ("i386", "ppc64"):
        options.append(f"-machine {machine}")
    if cpu and arch != "i386":
        options.append(f"-cpu {cpu}")
    options.append(f"-smp {smp}")
    options.append("-no-reboot")
    options.extend(extra)
    env = jinja2.sandbox.SandboxedEnvironment(
        loader=jinja2.FileSystemLoader([templates_dir]),
        autoescape=False,
        trim_blocks=True,
    )
    variables = {
        "arch": arch,
        "no_kvm": True,
        "memory": memory,
        "netdevice": "user",
        "extra_options": options,
    }
    if arch == "i386":
        variables["cpu"] = cpu or "max"
        variables["machine"] = machine or "pc"
    if arch == "ppc64" and machine:
        variables["machine"] = machine
    text = env.get_template("qemu.jinja2").render(**variables)
    config = yaml.safe_load(text)
    if command:
        # The binary is a plain scalar on its own line under `command:`
        # (in the qemu and qemu-nfs methods).
        binary = config["actions"]["boot"]["methods"]["qemu"]["parameters"]["command"]
        lines = text.split("\n")
        text = "\n".join(
            line.replace(binary, command) if line.strip() == binary else line for line in lines
        )
        config = yaml.safe_load(text)
    command = config["actions"]["boot"]["methods"]["qemu"]["parameters"]["command"]
    if not command:
        raise SystemExit(f"render_device: no QEMU command rendered for arch {arch}")
    if "-enable-kvm" in config["actions"]["boot"]["methods"]["qemu"]["parameters"]["options"]:
        raise SystemExit("render_device: the rendered options still enable KVM")
    return text


def main(argv):
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("templates_dir")
    p.add_argument("arch")
    p.add_argument("output")
    p.add_argument("--memory", type=int, default=1024, help="guest memory in MiB (default 1024)")
    p.add_argument("--smp", type=int, default=2, help="vCPUs (default 2)")
    p.add_argument("--cpu", help="QEMU CPU model (default: the appliance's for the arch)")
    p.add_argument("--machine", help="QEMU machine type (default: the appliance's for the arch)")
    p.add_argument("--extra", action="append", default=[], help="one more QEMU option string (repeatable)")
    p.add_argument("--command", help="the QEMU binary to run instead of the template's")
    a = p.parse_args(argv)
    text = render(a.templates_dir, a.arch, a.memory, a.smp, a.cpu, a.machine, a.extra, a.command)
    with open(a.output, "w", encoding="utf-8") as f:
        f.write(text)


if __name__ == "__main__":
    main(sys.argv[1:])
