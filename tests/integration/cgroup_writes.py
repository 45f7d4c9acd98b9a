"""What a sandbox's processes can do to its cgroup files: the script a hardening test runs inside."""

# Each mount point under /sys/fs/cgroup as the sandbox sees it (statvfs reads the topmost mount), then,
# as whoever runs it, a write of "no limit" into each limit file the host's layout has.
CGROUP_WRITES = r"""
import json, os
points = sorted({line.split()[4] for line in open("/proc/self/mountinfo") if line.split()[4].startswith("/sys/fs/cgroup")})
writable = [p for p in points if not os.statvfs(p).f_flag & os.ST_RDONLY]
limits = ["pids/pids.max", "memory/memory.limit_in_bytes", "memory/memory.memsw.limit_in_bytes",
          "cpu/cpu.cfs_quota_us", "pids.max", "memory.max", "cpu.max"]
written = {}
for name in limits:
    path = "/sys/fs/cgroup/" + name
    if os.path.exists(path):
        try:
            with open(path, "w") as f:
                f.write("max" if "pids" in name or name.endswith(".max") else "-1")
            written[name] = "written"
        except OSError as exc:
            written[name] = exc.strerror
try:
    open("/sys/fs/cgroup/planted", "w").write("x")
    written["planted"] = "written"
except OSError as exc:
    written["planted"] = exc.strerror
print(json.dumps({"points": points, "writable": writable, "written": written}))
"""
