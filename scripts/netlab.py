#!/usr/bin/env python3
"""A network lab: the workers of a distributed-training command on this one machine, each in its
own network namespace behind a link of a chosen rate, so the command can be timed on a constrained
network (docs/training.md, "A network lab"; docs/architecture.md, "The network lab"). Needs root.

    scripts/netlab.py --rate 10mbit|100mbit|1gbit|10gbit|none --workers N [--timeout SECONDS]
        [--port P] [--logs DIR] [--no-measure] -- COMMAND [ARGS...]
    scripts/netlab.py --cleanup

Topology: a "switch" namespace holds a Linux bridge (10.77.0.254); each worker's namespace is
joined to it by a veth pair (worker side gsl<pid>w<rank>, address 10.77.0.<rank+1>/24; bridge side
gsl<pid>b<rank>). Every name starts with gsl<pid> (the lab's pid); nothing is made in the root
namespace. With a rate, a tbf qdisc sits on both ends of each veth: the worker's end shapes what
it sends, the bridge's end what it receives. There is no latency emulation (that needs netem).

Before the workers start, the lab measures each link with a short TCP transfer each way between
the worker's namespace and the switch and prints the TCP payload rate beside the rate asked for
(headers take about 4.4% of a full frame). Each worker runs COMMAND through `ip netns exec` with
the caller's environment plus what torchrun sets (RANK, WORLD_SIZE, LOCAL_RANK=0,
LOCAL_WORLD_SIZE=1, MASTER_ADDR: rank 0's address, MASTER_PORT) and GLOO_SOCKET_IFNAME (its
veth); in ARGS, {rank}, {world_size}, {master_addr}, {master_port} and {ifname} become the same
values. Output lines go to stdout prefixed `[rank R] `, or to DIR/rank-R.log with --logs. When a
worker fails, the others are stopped: SIGTERM to each worker's process group, SIGKILL 3 s later.
Every exit path (the end, a failure, --timeout, SIGINT, SIGTERM, SIGHUP, an error while building)
kills whatever still runs in the lab's namespaces and deletes them, and their links with them.
--cleanup does the same for the namespaces of labs that no longer run (killed with SIGKILL).

--stats FILE writes each worker's bytes sent and received on its link while the command ran (the
kernel's counters of its veth, headers included), as JSON, when every worker succeeded.

Exit status: 0 every worker succeeded; 1 a worker failed; 2 bad usage; 3 the lab cannot run here
(one line says why: not root, no namespaces, no tbf); 4 the lab failed while it was being built;
124 --timeout expired; 128+N signal N stopped the lab.

Examples:
    sudo scripts/netlab.py --rate 100mbit --workers 2 -- python3 train.py
    sudo scripts/netlab.py --rate 1gbit --workers 4 -- build/cli/gradscope train \\
        --workers {world_size} --rank {rank} --master-addr {master_addr} --master-port {master_port}
"""

import argparse
import contextlib
import ctypes
import json
import os
import re
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time

EXIT_FAILED, EXIT_UNAVAILABLE, EXIT_LAB_ERROR, EXIT_TIMEOUT = 1, 3, 4, 124  # argparse's usage: 2
GRACE_S = 3.0  # SIGTERM to SIGKILL
SUBNET = "10.77.0"  # workers .1 to .250, the switch's bridge .254
MAX_WORKERS = 250
WARMUP_S, WINDOW_S = 0.2, 0.5  # per direction: the tbf burst and slow start, then the count
CLONE_NEWNET, PR_SET_PDEATHSIG = 0x40000000, 1
STOP_SIGNALS = (signal.SIGINT, signal.SIGTERM, signal.SIGHUP)
NAME = re.compile(r"^gsl(\d+)-")  # a lab's namespaces: gsl<pid>-sw, gsl<pid>-w<rank>, gsl<pid>-probe
_libc = ctypes.CDLL(None, use_errno=True)


class LabError(Exception):
    """A command or step of the lab failed; the message is one line."""


class Stopped(Exception):
    """A stop signal arrived (the handler only records it; the lab checks between steps)."""


def say(line):
    print(f"netlab: {line}", file=sys.stderr, flush=True)


def run(*argv, check=True):
    """Runs an iproute2 command; returns its stdout, or raises LabError with its first error line.
    In a session of its own, so that a Ctrl-C meant for the lab does not kill it halfway."""
    r = subprocess.run(argv, capture_output=True, text=True, start_new_session=True)
    if check and r.returncode != 0:
        err = (r.stderr.strip().splitlines() or [f"exit status {r.returncode}"])[0]
        raise LabError(f"`{' '.join(argv)}` failed: {err}")
    return r.stdout


def parse_rate(text):
    """Bits per second of a tc rate such as 100mbit; None for "none" (unshaped)."""
    if text == "none":
        return None
    m = re.fullmatch(r"(\d+(?:\.\d+)?)(kbit|mbit|gbit)", text)
    if not m or float(m.group(1)) <= 0:
        raise ValueError(f"rate {text!r}: give e.g. 10mbit, 100mbit, 1gbit, 10gbit or none")
    return int(float(m.group(1)) * {"kbit": 1e3, "mbit": 1e6, "gbit": 1e9}[m.group(2)])


def tbf_args(bps):
    """tc arguments of a tbf at bps. burst (bytes it may send back to back above the rate) is 1 ms
    of the rate and at least 16 KiB (ten full frames): a smaller one leaves the link idle between
    the kernel's wake-ups, and at 10gbit 1 ms is 1.25 MB. limit (bytes it may queue) is the burst
    plus 20 ms of the rate and at least 256 KiB, more than the TCP windows the kernel opens on
    these links: a 128 KiB queue at 10mbit drops enough to stall TCP on retransmission timeouts
    (4 to 8 Mbit/s measured instead of 9.6); with 256 KiB every rate measures steadily."""
    byte_rate = bps / 8
    burst = max(int(byte_rate * 0.001), 16 << 10)
    limit = burst + max(int(byte_rate * 0.020), 256 << 10)
    return ["tbf", "rate", str(bps), "burst", str(burst), "limit", str(limit)]


def human_rate(bps):
    return f"{bps / 1e9:.2f} Gbit/s" if bps >= 1e9 else f"{bps / 1e6:.1f} Mbit/s"


def unavailable_reason(rate="100mbit"):
    """None when the lab can run here with this rate, else the one line that says why not. Probes
    with a namespace, a veth pair, a bridge and (unless rate is "none") a tbf, removed at once."""
    if os.geteuid() != 0:
        return "netlab: needs root (uid 0) to create network namespaces and links: " "run it as root or with sudo"
    for tool in ("ip", "tc"):
        if not shutil.which(tool):
            return f"netlab: network namespaces are not available: `{tool}` (iproute2) is not installed"
    probe = f"gsl{os.getpid()}-probe"
    try:
        try:
            run("ip", "netns", "add", probe)
        except LabError as e:
            return f"netlab: network namespaces are not available: {e}"
        try:
            run("ip", "-n", probe, "link", "add", "probe0", "type", "veth", "peer", "name", "probe1")
            run("ip", "-n", probe, "link", "add", "probebr", "type", "bridge")
        except LabError as e:
            return f"netlab: veth pairs or Linux bridges are not available: {e}"
        bps = parse_rate(rate)
        if bps:
            try:
                run("tc", "-n", probe, "qdisc", "add", "dev", "probe0", "root", *tbf_args(bps))
            except LabError as e:
                return f"netlab: the tbf qdisc is not available: {e}"
        return None
    finally:
        run("ip", "netns", "del", probe, check=False)


def lab_namespaces(prefix=None):
    """Namespaces of labs: of the lab with this prefix, or (None) of every lab, as {name: pid}."""
    names = [line.split()[0] for line in run("ip", "netns", "list", check=False).splitlines() if line.strip()]
    return {
        n: int(NAME.match(n).group(1))
        for n in names
        if NAME.match(n) and (prefix is None or n.startswith(prefix + "-"))
    }


def remove_namespace(ns):
    """Kills every process in namespace ns, waits for them (at most 2 s), then deletes it; its
    links go with it."""
    deadline = time.monotonic() + 2
    while pids := run("ip", "netns", "pids", ns, check=False).split():
        for pid in pids:
            with contextlib.suppress(ProcessLookupError):
                os.kill(int(pid), signal.SIGKILL)
        if time.monotonic() > deadline:
            say(f"processes {' '.join(pids)} in {ns} do not die; deleting its name anyway")
            break
        time.sleep(0.05)
    run("ip", "netns", "del", ns, check=False)


def lab_alive(pid):
    """Whether pid is a running netlab.py (not another process that got the pid since)."""
    try:
        with open(f"/proc/{pid}/cmdline", "rb") as f:
            return any(os.path.basename(a) == b"netlab.py" for a in f.read().split(b"\0"))
    except OSError:
        return False


def cleanup():
    """Removes the namespaces (with their links and processes) of labs whose process is gone."""
    gone = {ns: pid for ns, pid in lab_namespaces().items() if not lab_alive(pid)}
    for ns, pid in sorted(gone.items()):
        remove_namespace(ns)
        say(f"removed {ns} (lab pid {pid} is gone)")
    if not gone:
        say("nothing to clean up")
    return 0


def socket_in(ns):
    """A TCP socket of namespace ns: this thread enters it, makes the socket and comes back."""
    with open(f"/run/netns/{ns}") as target, open("/proc/thread-self/ns/net") as home:
        if _libc.setns(target.fileno(), CLONE_NEWNET) != 0:
            raise LabError(f"setns {ns}: {os.strerror(ctypes.get_errno())}")
        try:
            return socket.socket()
        finally:
            if _libc.setns(home.fileno(), CLONE_NEWNET) != 0:
                raise LabError(f"setns back: {os.strerror(ctypes.get_errno())}")


# The measurement's buffers, made once: a fresh receive buffer costs the first transfer its page
# faults, and the data is not zeros, which the kernel would read from its one cached zero page.
_SEND, _RECEIVE = b"\1" * (256 << 10), bytearray(b"\1" * (1 << 20))


def _pump(sock):
    try:
        while True:
            sock.sendall(_SEND)
    except OSError:
        pass  # the receiver shut the connection: the measurement is over


def _set_pdeathsig():  # runs in the worker's child before exec: die with the lab
    _libc.prctl(PR_SET_PDEATHSIG, signal.SIGKILL)


def describe(code):
    if code >= 0:
        return f"exit status {code}"
    try:
        return f"killed by signal {-code} ({signal.Signals(-code).name})"
    except ValueError:
        return f"killed by signal {-code}"


class Lab:
    """The lab's namespaces, links and worker processes; teardown() removes them all, once."""

    def __init__(self, workers, bps):
        self.workers, self.bps = workers, bps
        self.prefix = f"gsl{os.getpid()}"
        self.switch = f"{self.prefix}-sw"
        self.procs, self.relays = [], []
        self.signal = None
        self.torn_down = False

    def ns(self, rank):
        return f"{self.prefix}-w{rank}"

    def ifname(self, rank):
        return f"{self.prefix}w{rank}"

    def on_signal(self, signum, _frame):
        self.signal = self.signal or signum

    def check(self):
        if self.signal:
            raise Stopped(self.signal)

    def ip(self, *args):
        self.check()
        return run("ip", *args)

    def build(self):
        br = f"{self.prefix}br"
        self.ip("netns", "add", self.switch)
        self.ip("-n", self.switch, "link", "add", br, "type", "bridge")
        self.ip("-n", self.switch, "addr", "add", f"{SUBNET}.254/24", "dev", br)
        self.ip("-n", self.switch, "link", "set", br, "up")
        for r in range(self.workers):
            ns, wif, bif = self.ns(r), self.ifname(r), f"{self.prefix}b{r}"
            self.ip("netns", "add", ns)
            self.ip("-n", self.switch, "link", "add", bif, "type", "veth", "peer", "name", wif, "netns", ns)
            self.ip("-n", self.switch, "link", "set", bif, "master", br, "up")
            self.ip("-n", ns, "addr", "add", f"{SUBNET}.{r + 1}/24", "dev", wif)
            self.ip("-n", ns, "link", "set", wif, "up")
            self.ip("-n", ns, "link", "set", "lo", "up")
            if self.bps:
                for where, dev in ((ns, wif), (self.switch, bif)):
                    self.check()
                    run("tc", "-n", where, "qdisc", "add", "dev", dev, "root", *tbf_args(self.bps))

    def transfer(self, rank, up):
        """Bits per second of a TCP transfer from the worker to the switch (up) or back, counted
        by the receiver over WINDOW_S after WARMUP_S."""
        socks = []
        try:
            server = socket_in(self.switch)
            socks.append(server)
            client = socket_in(self.ns(rank))
            socks.append(client)
            server.bind((f"{SUBNET}.254", 0))
            server.listen(1)
            server.settimeout(5)
            client.settimeout(5)
            client.connect(server.getsockname())
            conn = server.accept()[0]
            socks.append(conn)
            conn.settimeout(5)
            sender, receiver = (client, conn) if up else (conn, client)
            pump = threading.Thread(target=_pump, args=(sender,), daemon=True)
            pump.start()
            try:
                return self.count(receiver, rank)
            finally:
                for sock in (client, conn):
                    with contextlib.suppress(OSError):
                        sock.shutdown(socket.SHUT_RDWR)  # wakes the pump up
                pump.join(5)
        except socket.timeout:
            raise LabError(f"worker {rank}'s link carried nothing for 5 s during the measurement")
        finally:
            for sock in socks:
                sock.close()

    def count(self, receiver, rank):
        first = start = None
        got = 0
        while True:
            self.check()
            n = receiver.recv_into(_RECEIVE)
            if not n:
                raise LabError(f"worker {rank}'s link closed during the measurement")
            now = time.monotonic()
            first = first or now
            if start is None:
                start = now if now - first >= WARMUP_S else None
            else:
                got += n
                if now - start >= WINDOW_S:
                    return got * 8 / (now - start)

    def measure(self, rate):
        for r in range(self.workers):
            up, down = self.transfer(r, True), self.transfer(r, False)
            note = ""
            if not self.bps:
                note = " (CPU-bound above this)"
            elif min(up, down) < 0.85 * self.bps:
                note = " (below the rate asked for: CPU-bound here)"
            label = rate if self.bps else "none (unshaped)"
            say(f"worker {r} link {label}: measured {human_rate(up)} up, {human_rate(down)} down{note}")

    def link_bytes(self):
        """Each worker's bytes sent and received on its veth so far (the kernel's counters, every
        header included): [(tx, rx), ...] by rank."""
        out = []
        for r in range(self.workers):
            stats = f"/sys/class/net/{self.ifname(r)}/statistics"
            text = run("ip", "netns", "exec", self.ns(r), "cat", f"{stats}/tx_bytes", f"{stats}/rx_bytes")
            tx, rx = (int(v) for v in text.split())
            out.append((tx, rx))
        return out

    def start(self, command, port, logs):
        master = f"{SUBNET}.1"
        for r in range(self.workers):
            values = {
                "rank": r,
                "world_size": self.workers,
                "master_addr": master,
                "master_port": port,
                "ifname": self.ifname(r),
            }
            argv = list(command)
            for key, value in values.items():
                argv = [a.replace("{" + key + "}", str(value)) for a in argv]
            env = dict(
                os.environ,
                RANK=str(r),
                WORLD_SIZE=str(self.workers),
                LOCAL_RANK="0",
                LOCAL_WORLD_SIZE="1",
                MASTER_ADDR=master,
                MASTER_PORT=str(port),
                GLOO_SOCKET_IFNAME=self.ifname(r),
            )
            self.check()
            out = open(os.path.join(logs, f"rank-{r}.log"), "wb") if logs else subprocess.PIPE
            try:
                self.procs.append(
                    subprocess.Popen(
                        ["ip", "netns", "exec", self.ns(r), *argv],
                        env=env,
                        stdin=subprocess.DEVNULL,
                        stdout=out,
                        stderr=subprocess.STDOUT,
                        start_new_session=True,
                        preexec_fn=_set_pdeathsig,
                    )
                )
            finally:
                if logs:
                    out.close()
        if not logs:  # threads only once every worker is forked (preexec_fn)
            lock = threading.Lock()
            for r, p in enumerate(self.procs):
                t = threading.Thread(target=self.relay, args=(p.stdout, r, lock), daemon=True)
                t.start()
                self.relays.append(t)

    @staticmethod
    def relay(stream, rank, lock):
        prefix = f"[rank {rank}] ".encode()
        for line in iter(stream.readline, b""):
            with lock:
                try:
                    sys.stdout.buffer.write(prefix + line + (b"" if line.endswith(b"\n") else b"\n"))
                    sys.stdout.buffer.flush()
                except OSError:
                    pass  # stdout is gone: keep draining, or the worker blocks

    def wait(self, timeout):
        """Waits for the workers: 0 when all succeed; a failure or the timeout ends it at once."""
        deadline = time.monotonic() + timeout if timeout else None
        while True:
            self.check()
            codes = [p.poll() for p in self.procs]
            for r, code in enumerate(codes):
                if code not in (None, 0):
                    say(f"worker {r} failed ({describe(code)}); stopping the others")
                    return EXIT_FAILED
            if all(code == 0 for code in codes):
                return 0
            if deadline and time.monotonic() >= deadline:
                running = [str(r) for r, code in enumerate(codes) if code is None]
                say(
                    f"--timeout {timeout:g} s expired with worker(s) {', '.join(running)} still running; "
                    "stopping them"
                )
                return EXIT_TIMEOUT
            time.sleep(0.05)

    def stop_workers(self):
        """SIGTERM to each worker's process group, SIGKILL to what is left GRACE_S later. A group
        once found empty is not signalled again (its number could be reused)."""
        groups = {p.pid for p in self.procs}

        def signal_groups(sig):
            for p in self.procs:
                p.poll()  # reaps an exited leader
            for g in list(groups):
                try:
                    os.killpg(g, sig)
                except ProcessLookupError:
                    groups.discard(g)
            return groups

        deadline = time.monotonic() + GRACE_S
        if signal_groups(signal.SIGTERM):
            while signal_groups(0) and time.monotonic() < deadline:
                time.sleep(0.05)
            signal_groups(signal.SIGKILL)
        for p in self.procs:
            p.wait()

    def teardown(self):
        """Stops the workers, then removes every namespace of this lab (the half-built ones too)
        after killing what runs in them. Signals are ignored meanwhile; safe to call again."""
        if self.torn_down:
            return
        self.torn_down = True
        for s in STOP_SIGNALS:
            signal.signal(s, signal.SIG_IGN)
        try:
            self.stop_workers()
        finally:
            for ns in sorted(lab_namespaces(self.prefix), key=lambda n: n == self.switch):
                remove_namespace(ns)
            for t in self.relays:
                t.join(2)


def parse_args(argv):
    p = argparse.ArgumentParser(
        prog="netlab.py", description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    p.add_argument(
        "--rate",
        help="each worker's link rate, both directions: "
        "10mbit, 100mbit, 1gbit, 10gbit (any N kbit/mbit/gbit) or none (unshaped)",
    )
    p.add_argument("--workers", type=int, help=f"number of workers, 1 to {MAX_WORKERS}")
    p.add_argument(
        "--timeout",
        type=float,
        default=0,
        help="seconds the workers may run before they are killed (default: no limit)",
    )
    p.add_argument("--port", type=int, default=29500, help="MASTER_PORT (default 29500)")
    p.add_argument("--logs", metavar="DIR", help="write worker R's output to DIR/rank-R.log")
    p.add_argument("--no-measure", action="store_true", help="do not measure the links first")
    p.add_argument(
        "--stats",
        metavar="FILE",
        help="write each worker's bytes sent and received over the run (JSON) when all succeed",
    )
    p.add_argument("--cleanup", action="store_true", help="remove what labs no longer running left behind, and exit")
    p.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
    args = p.parse_args(argv)
    if args.command[:1] == ["--"]:
        args.command = args.command[1:]
    if args.cleanup:
        return args
    if args.rate is None or args.workers is None or not args.command:
        p.error("--rate, --workers and -- COMMAND are required")
    try:
        args.bps = parse_rate(args.rate)
    except ValueError as e:
        p.error(str(e))
    if not 1 <= args.workers <= MAX_WORKERS or args.timeout < 0 or not 0 < args.port < 65536:
        p.error(f"--workers must be 1 to {MAX_WORKERS}, --timeout >= 0, --port 1 to 65535")
    return args


def main(argv=None):
    args = parse_args(argv)
    if args.cleanup:
        if os.geteuid() != 0:
            print(unavailable_reason(), file=sys.stderr)
            return EXIT_UNAVAILABLE
        return cleanup()
    lab = Lab(args.workers, args.bps)
    for s in STOP_SIGNALS:
        if signal.getsignal(s) != signal.SIG_IGN:  # as nohup or a shell's `&` left it: keep
            signal.signal(s, lab.on_signal)
    try:
        reason = unavailable_reason(args.rate)
        lab.check()
        if reason:
            print(reason, file=sys.stderr)
            return EXIT_UNAVAILABLE
        if args.logs:
            os.makedirs(args.logs, exist_ok=True)
        lab.build()
        if not args.no_measure:
            lab.measure(args.rate)
        before = lab.link_bytes() if args.stats else None
        lab.start(args.command, args.port, args.logs)
        code = lab.wait(args.timeout)
        if args.stats and code == 0:
            after = lab.link_bytes()
            with open(args.stats, "w") as f:
                json.dump(
                    {
                        "rate": args.rate,
                        "workers": args.workers,
                        "tx_bytes": [a[0] - b[0] for a, b in zip(after, before)],
                        "rx_bytes": [a[1] - b[1] for a, b in zip(after, before)],
                    },
                    f,
                )
        return code
    except (Stopped, LabError, OSError) as e:
        if lab.signal:  # also a command of the lab killed by the same Ctrl-C
            say(f"stopped by {signal.Signals(lab.signal).name}; removing the lab")
            return 128 + lab.signal
        say(f"error: {e}; removing the lab")
        return EXIT_LAB_ERROR
    finally:
        lab.teardown()


if __name__ == "__main__":
    sys.exit(main())
