# The python kernel of `exec --kernel` (standard library only). Started by
# the sandbox's PID 1; fd 3 is its request socket: one JSON line in
# ({"code": ..., "marker": ...}), one JSON line out ({"exit_code": N,
# "result": repr-or-null}). Output goes to fd 1 and fd 2; after each call
# the marker is written to both, so that the caller knows it has it all.
import ast, asyncio, json, os, socket, sys, traceback

try:  # other code of the sandbox must not ptrace the kernel
    import ctypes
    ctypes.CDLL(None).prctl(4, 0, 0, 0, 0)  # PR_SET_DUMPABLE, 0
except Exception:
    pass

_sock = socket.socket(fileno=3)
_rf = _sock.makefile("rb")
_ns = {"__name__": "__main__", "__builtins__": __builtins__}
_loop = asyncio.new_event_loop()
asyncio.set_event_loop(_loop)
_FLAGS = ast.PyCF_ALLOW_TOP_LEVEL_AWAIT
_CO_COROUTINE = 0x80


def _run(code, flags=_FLAGS, mode="exec"):
    c = compile(code, "<cell>", mode, flags=flags, dont_inherit=True)
    v = eval(c, _ns)
    if c.co_flags & _CO_COROUTINE:
        v = _loop.run_until_complete(v)
    return v


def _call(src):
    tree = ast.parse(src, "<cell>", "exec")
    last = None
    if tree.body and isinstance(tree.body[-1], ast.Expr):
        last = ast.Expression(tree.body.pop().value)
        ast.copy_location(last, last.body)
    if tree.body:
        _run(tree)
    if last is None:
        return None
    v = _run(last, mode="eval")
    if v is None:
        return None
    _ns["_"] = v
    return repr(v)


while True:
    line = _rf.readline()
    if not line:
        os._exit(0)
    req = json.loads(line)
    code, result = 0, None
    try:
        result = _call(req.get("code", ""))
    except SystemExit as e:
        code = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if not isinstance(e.code, int) and e.code is not None:
            print(e.code, file=sys.stderr)
    except BaseException as e:
        code = 1
        try:
            tb = e.__traceback__
            while tb is not None and tb.tb_frame.f_code.co_filename != "<cell>":
                tb = tb.tb_next
            traceback.print_exception(type(e), e, tb)
        except BaseException:
            pass
    for f in (sys.stdout, sys.stderr):
        try:
            f.flush()
        except BaseException:
            pass
    m = req.get("marker", "").encode()
    for fd in (1, 2):
        try:
            os.write(fd, m)
        except OSError:
            pass
    _sock.sendall((json.dumps({"marker": req.get("marker", ""), "exit_code": code, "result": result}) + "\n").encode())
