"""Small python3 programs the tool runs inside a sandbox, as the sandbox user (pure strings).

They run through the backend's exec as the sandbox user, so they can reach
exactly the processes an agent could: the agent's own. And so could a process
the agent left running reach them, the same user's, if they could be traced:
a killer made to kill nothing, a listing made to lie (found by the twelfth
round's second helper). So each runs by `interpreter()`, the execute-only
copy of python3, whose process is non-dumpable from its first instruction
(as the sandbox user, and as root, which the copy's mode shuts out too), and
none of them starts another program.
"""

from __future__ import annotations

from agent_eval_sandbox.inside import paths


def interpreter(script: str, *args: str) -> list[str]:
    """The argv that runs `script` in the sandbox: untraceable by the sandbox user's other processes."""
    return [*paths.PROTECTED_INTERPRETER, "-c", script, *args]


# Set on "kill_exec" commands so that their processes (and children that
# inherit the environment) can be found and killed inside the sandbox: the
# exec's pid on the host is not visible to a controller running elsewhere.
EXEC_MARKER = "AGENT_EVAL_EXEC"
KILLER = (
    "import os,sys\n"
    "mark=sys.argv[1].encode()\n"
    "for _ in range(20):\n"
    "  hit=0\n"
    "  for p in os.listdir('/proc'):\n"
    "    if not p.isdigit(): continue\n"
    "    try:\n"
    "      if mark not in open('/proc/'+p+'/environ','rb').read().split(b'\\0'): continue\n"
    "      hit=1\n"
    "      try: os.killpg(int(p),9)\n"
    "      except OSError: pass\n"
    "      os.kill(int(p),9)\n"
    "    except OSError: pass\n"
    "  if not hit: break\n"
)
# kill(-1, sig) reaches every process the caller may signal but pid 1 and itself, in one
# pass under the kernel's task list lock: a fork bomb cannot outrun it. In a Pod's
# container (its own pid namespace) that is every process of the agent.
STOP_ALL = "import os,signal\nos.kill(-1,signal.SIGSTOP)\n"
KILL_ALL = (
    "import os,signal\n"
    "for _ in range(50):\n"
    "  try: os.kill(-1,signal.SIGKILL)\n"
    "  except ProcessLookupError: raise SystemExit(0)\n"
    "raise SystemExit(1)\n"
)

# SIGKILL to every process the caller may signal (kill(-1) spares only the caller), until no other
# process of its user is left (a killed one stays in /proc until its parent reaps it): exit 0 then, 1
# if some never went.
KILL_LEFTOVERS = (
    "import os,signal,sys,time\n"
    "me,uid=os.getpid(),os.getuid()\n"
    "def left():\n"
    "  n=0\n"
    "  for p in os.listdir('/proc'):\n"
    "    if p.isdigit() and int(p)!=me:\n"
    "      try: n+=os.stat('/proc/'+p).st_uid==uid\n"
    "      except OSError: pass\n"
    "  return n\n"
    "for _ in range(100):\n"
    "  try: os.kill(-1,signal.SIGKILL)\n"
    "  except OSError: pass\n"
    "  if not left(): sys.exit(0)\n"
    "  time.sleep(0.01)\n"
    "sys.exit(1)\n"
)

# Every regular file under argv[1], on its filesystem only (`find -xdev -type f`), as
# "size mtime path\0" with the path relative to it; iterative, so no depth of directories stops it.
LIST_FILES = (
    "import os,stat,sys\n"
    "root=sys.argv[1]\n"
    "dev=os.lstat(root).st_dev\n"
    "out=sys.stdout.buffer\n"
    "todo=[(root,'')]\n"
    "while todo:\n"
    "  d,rel=todo.pop()\n"
    "  try: entries=list(os.scandir(d))\n"
    "  except OSError: continue\n"
    "  for e in entries:\n"
    "    try: st=e.stat(follow_symlinks=False)\n"
    "    except OSError: continue\n"
    "    if stat.S_ISDIR(st.st_mode):\n"
    "      if st.st_dev==dev: todo.append((e.path,rel+e.name+'/'))\n"
    "    elif stat.S_ISREG(st.st_mode):\n"
    "      s,n=divmod(st.st_mtime_ns,10**9)\n"
    "      out.write(b'%d %d.%09d %s\\0'%(st.st_size,s,n,os.fsencode(rel+e.name)))\n"
)

# "kind|size|path" for each argument that exists, even as a dangling link (never followed); the
# kinds are `stat -c %F`'s.
LOOK = (
    "import os,stat,sys\n"
    "for f in sys.argv[1:]:\n"
    "  try: st=os.lstat(f)\n"
    "  except OSError: continue\n"
    "  m=st.st_mode\n"
    "  if stat.S_ISREG(m): k='regular empty file' if st.st_size==0 else 'regular file'\n"
    "  elif stat.S_ISLNK(m): k='symbolic link'\n"
    "  elif stat.S_ISDIR(m): k='directory'\n"
    "  elif stat.S_ISFIFO(m): k='fifo'\n"
    "  elif stat.S_ISSOCK(m): k='socket'\n"
    "  elif stat.S_ISCHR(m): k='character special file'\n"
    "  elif stat.S_ISBLK(m): k='block special file'\n"
    "  else: k='weird file'\n"
    "  sys.stdout.write('%s|%d|%s\\n'%(k,st.st_size,f))\n"
)

# Removes each argument (`rm -rf`): a directory with what is in it, anything else itself; a link
# is removed, never followed; iterative, so no depth of directories stops it. Exit 1 if something
# stayed.
REMOVE = (
    "import os,stat,sys\n"
    "bad=0\n"
    "def gone(call,path):\n"
    "  global bad\n"
    "  try: call(path)\n"
    "  except FileNotFoundError: pass\n"
    "  except OSError as e: sys.stderr.write('%s: %s\\n'%(path,e.strerror)); bad=1\n"
    "for f in sys.argv[1:]:\n"
    "  try: top=stat.S_ISDIR(os.lstat(f).st_mode)\n"
    "  except OSError: top=False\n"
    "  if not top:\n"
    "    gone(os.unlink,f); continue\n"
    "  dirs,todo=[],[f]\n"
    "  while todo:\n"
    "    d=todo.pop(); dirs.append(d)\n"
    "    try: entries=list(os.scandir(d))\n"
    "    except OSError as e: sys.stderr.write('%s: %s\\n'%(d,e.strerror)); bad=1; continue\n"
    "    for e in entries:\n"
    "      if e.is_dir(follow_symlinks=False): todo.append(e.path)\n"
    "      else: gone(os.unlink,e.path)\n"
    "  for d in reversed(dirs): gone(os.rmdir,d)\n"
    "sys.exit(bad)\n"
)
