"""Hosts made of network namespaces (issue 45), for tests/dist/two_hosts.py and
bench/two_hosts_network.py: n namespaces on a private /24 around a bridge, optionally shaped with
tbf, one `saturate launch --nnodes N` per namespace, everything removed afterwards (also on
failure). Needs root. No traffic leaves the machine: the addresses live only inside the
namespaces made here."""
import contextlib
import os
import subprocess


class NotRoot(RuntimeError):
    pass


def sh(*args, check=True):
    p = subprocess.run(list(args), capture_output=True, text=True)
    if check and p.returncode != 0:
        raise RuntimeError(f"{' '.join(args)}: {p.stderr.strip()}")
    return p


@contextlib.contextmanager
def hosts(n, rate=None):
    """n namespaces ("hosts") on 10.77.S.0/24 around a bridge in the first: yields their names and
    addresses; `rate` ("100mbit") shapes both ends of every veth pair with tbf (netem does not exist
    here). Deleting a namespace removes its veth ends; processes inside are killed first."""
    if os.geteuid() != 0:
        raise NotRoot("needs root to make network namespaces (CI runs as root); run the suite as root")
    tag = f"{os.getpid() % 100000}"
    subnet = 10 + os.getpid() % 200
    names = [f"sat{tag}h{i}" for i in range(n)]
    addrs = [f"10.77.{subnet}.{i + 1}" for i in range(n)]
    try:
        for name in names:
            sh("ip", "netns", "add", name)
            sh("ip", "-n", name, "link", "set", "lo", "up")
        sh("ip", "-n", names[0], "link", "add", "br0", "type", "bridge")
        sh("ip", "-n", names[0], "addr", "add", addrs[0] + "/24", "dev", "br0")
        sh("ip", "-n", names[0], "link", "set", "br0", "up")
        for i in range(1, n):
            a, b = f"s{tag}a{i}", f"s{tag}b{i}"  # under 16 characters
            sh("ip", "link", "add", a, "type", "veth", "peer", "name", b)
            sh("ip", "link", "set", a, "netns", names[0])
            sh("ip", "link", "set", b, "netns", names[i])
            sh("ip", "-n", names[0], "link", "set", a, "master", "br0")
            sh("ip", "-n", names[0], "link", "set", a, "up")
            sh("ip", "-n", names[i], "addr", "add", addrs[i] + "/24", "dev", b)
            sh("ip", "-n", names[i], "link", "set", b, "up")
            if rate:
                for ns, dev in ((names[0], a), (names[i], b)):
                    sh("ip", "netns", "exec", ns, "tc", "qdisc", "add", "dev", dev, "root", "tbf", "rate", rate,
                       "burst", "32kbit", "latency", "400ms")
        yield names, addrs
    finally:
        for name in names:
            pids = sh("ip", "netns", "pids", name, check=False).stdout.split()
            for pid in pids:
                with contextlib.suppress(ProcessLookupError, ValueError):
                    os.kill(int(pid), 9)
            sh("ip", "netns", "del", name, check=False)


def start_nodes(binary, names, addrs, command, env_extra=None):
    """One `saturate launch --nnodes N` per host, started; "{node}" in the command is the node's rank."""
    env = {k: v for k, v in os.environ.items() if not k.endswith("SOCKET_IFNAME")}
    env.update(env_extra or {})
    procs = []
    for r, name in enumerate(names):
        cmd = ["ip", "netns", "exec", name, binary, "launch", "--nnodes", str(len(names)), "--node-rank", str(r),
               "--nproc-per-node", "1", "--master-addr", addrs[0], "--master-port", "29500", "--"] + \
              [binary] + [c.replace("{node}", str(r)) for c in command]
        procs.append(subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env))
    return procs


def launch_nodes(binary, names, addrs, command, env_extra=None, timeout=300):
    """One `saturate launch --nnodes N` per host, to the end; returns [(status, output)] by node."""
    return finish(start_nodes(binary, names, addrs, command, env_extra), timeout)


def finish(procs, timeout=300):
    out = []
    for p in procs:
        try:
            text, _ = p.communicate(timeout=timeout)
        except subprocess.TimeoutExpired:
            p.kill()
            text, _ = p.communicate()
            text += "\n(timed out)"
        out.append((p.returncode, text))
    return out
