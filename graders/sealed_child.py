"""The sealed test process: one test module under pytest, whose outcomes leave the process signed by a core that
was in place before the repository's first byte ran, and that the repository's code cannot reach.

graders.sealed (the parent, which never imports repository code) runs it as

    python3 -I -S -B --check-hash-based-pycs always -c <this file's source> <settings fd> <record fd>

Standalone: the standard library and pytest only (it runs inside the sandbox, as the agent's uid).

Before the repository runs (`main`):
1. the parent's key and settings arrive on a pipe, which is closed;
2. sys.path is the interpreter's standard library and the environment's site folders (their .pth files are
   processed); `-I -S` ignored PYTHON* variables, the user's site folder, sitecustomize and usercustomize;
3. `ImportGuard` goes first on sys.meta_path: a top-level module that the standard library, the test runner or
   the environment provides is loaded from there, even when a file of the repository would shadow it on
   sys.path, unless that file existed at the base commit;
4. pytest, its plug-ins, the environment's plug-ins and unittest are imported, and `_posixsubprocess` is made
   unreachable (its `fork_exec` starts a process without an audit event);
5. the state the verdict depends on is recorded (`snapshot`): the dictionaries of the standard library, runner
   (pytest, _pytest, pluggy, unittest) and builtins modules loaded by then, and of every class they define;
6. the core (`CORE`) becomes an audit hook (`sys.addaudithook`: it cannot be removed). The key is a constant of
   the core's code, not a variable: no frame, closure or global holds it, and reading the code of a core frame
   is tampering. Each record the core writes is `repr((seq, kind, *fields))`, a tab and HMAC-SHA256(key, that
   text), on a pipe only the parent reads. The core calls only C functions captured before this point.

pytest then runs the module with `Sealed` as a plug-in, which reports to the core through `sys.audit`:
- `collected` and `register`: the item ids and the direct parameters of each item when collection ends;
- `report`: each report pytest logs (phase, outcome, a short message);
- `body`: from `sealed_call`, a wrapper around each test function: `ok` only when the test function itself
  returned (and, for unittest, no subtest failed). The core accepts `ok` only from a frame running the wrapper's
  code, called by pytest's `pytest_pyfunc_call` or unittest's `_callTestMethod`, for the test running now, whose
  function is the one the id names (its code was executed from a restored test file, `genuine`, or is a library
  decorator, trusted code, around such a function; a method is bound to an instance of the id's class, which
  resolves the name to it) and whose parameters are the collected ones. A patched TestReport, junitxml,
  TestResult, exit status or hook therefore never turns a failing test function into a pass; records for a test
  that is not the one running, or a test begun twice, are forged;
- `done`: after each test the snapshot is compared with the live state (`check`): a replaced runner, standard
  library or builtins object (a monkeypatched TestReport, assertEqual, `_Outcome`) is tampering; so is a
  standard-library or runner name in sys.modules bound to a module from outside the trusted folders (unless the
  repository had that file at the base commit), and a test module that no longer binds a function, class or
  module it bound when collection ended (the repository's code rebinding what a test imported);
- `end`: after pytest returns, from this file's frame; the process then exits at once (`os._exit`: no atexit
  handler, finalizer or thread of the repository runs after it).

Tampering ends the process at once after a signed `tamper` record (the parent runs the module's remaining tests
in a fresh process): walking the garbage collector, another thread's frames, a trace or profile function,
loading or using ctypes from the repository's code (a dependency may load it: numpy does), a sub-interpreter,
starting a process, opening a process's memory (/proc/<pid>/mem, directly, through a link or relative to a /proc
folder), reading a core frame's or function's code, changing the code or defaults of a runner function, an
integrity difference. Adding an audit hook is refused silently.

Not covered (docs/architecture.md): code that changes what a test computes while it runs and restores the state
before the test ends, an equality forged against only the values a test uses, threads racing the runner's own
bookkeeping, and reading this process's memory by means the core does not see (ctypes, when a dependency loaded it).
"""

import re
import sys

TAMPER_EXIT = 86
CORE_FILE = "<taskmine-sealed-core>"
KEY_TOKEN = "__SEALED_KEY__"

# What pytest's own plug-ins set while configuring (legacypath's properties, the debugger's class state): their
# baseline is their value when the session starts; every other entry's is its value before any test code ran.
CONFIGURED = {
    "_pytest.config.Config": ("_getini_unknown_type", "inifile", "invocation_dir", "rootdir"),
    "_pytest.cacheprovider.Cache": ("makedir",),
    "_pytest.fixtures.FixtureRequest": ("fspath",),
    "_pytest.main.Session": ("startdir",),
    "_pytest.nodes.Node": ("fspath",),
    "_pytest.terminal.TerminalReporter": ("startdir",),
    "_pytest.debugging.pytestPDB": ("_config", "_pluginmanager", "_recursive_debug", "_wrapped_pdb_cls"),
    "_pytest.unittest.TestCaseFunction": ("_pytest_diamond_inheritance_warning_shown",),
}
# What the runner changes all along (warnings captured per phase, its thread and debugger hooks): not checked.
VOLATILE = {
    "pdb": ("set_trace",),
    "threading": ("excepthook",),
    "warnings": ("filters", "showwarning", "_showwarnmsg_impl"),
}
# Caches the standard library keeps in module and class dictionaries (warnings' registry of warnings already
# shown, which unittest also resets; copyreg's slot names): never checked.
LAZY = ("__slotnames__", "__warningregistry__")
# The standard library's functions that hand a frame to their caller (logging.currentframe is a lambda), and the
# attributes that give a frame: the repository's code may not get one (a test's frame is one f_back away)
HANDOUTS = ("currentframe", "stack", "getouterframes", "getinnerframes", "trace", "walk_stack", "walk_tb", "<lambda>",
            "get_stack", "_getframe")
FRAME_ATTRS = ("tb_frame", "gi_frame", "cr_frame", "ag_frame")
# A Python test file by its path in the repository (task_builders.families.code_change uses this one too): a test
# folder, test_*.py, *_test(s).py, conftest.py. A test file of a task that is no such path is a module of the code
# holding doctests.
PY_TEST = re.compile(r"(^|/)(tests?|testing)/|(^|/)test_[^/]*\.py$|_tests?\.py$|(^|/)conftest\.py$")


def is_test_module(path: str) -> bool:
    return bool(PY_TEST.search(path))
RUNNER_TOPS = ("pytest", "_pytest", "pluggy", "unittest", "builtins", "iniconfig", "packaging", "py")
SENSITIVE = (
    "gc.get_objects", "gc.get_referrers", "gc.get_referents", "sys._current_frames", "sys.settrace",
    "sys.setprofile", "os.fork", "os.forkpty", "os.exec", "os.posix_spawn", "os.spawn", "os.system",
    "subprocess.Popen", "pty.spawn", "cpython.PyInterpreterState_New")
FORBIDDEN_IMPORTS = ("_testcapi", "_testinternalcapi", "_testbuffer", "_testmultiphase", "_testsinglephase",
                     "_xxsubinterpreters", "_xxinterpchannels", "_posixsubprocess")
# ctypes reads and writes the process's memory: the repository's own code may not load or use it; a dependency
# (numpy imports it) may, which leaves such a repository's tests that much less sealed (docs/architecture.md)
LIBRARY_ONLY_IMPORTS = ("ctypes", "_ctypes")

# The core. `make` receives every function and object it uses (captured before the repository runs) and returns
# the audit hook; nothing is looked up in a module. __SEALED_KEY__ is replaced by the key's bytes literal.
CORE = r'''
def make(S):
    (type_, str_, bytes_, int_, tuple_, list_, len_, repr_, id_, memoryview_, OSError_, BaseException_, RuntimeError_,
     write, exit_, hmac, ident, getframe, f_code, f_back, f_locals, tb_frame, fn_code, fn_dict, method_func,
     co_filename, co_name, co_consts, gc_isenabled, gc_disable, gc_enable, dict_get, dict_copy, proxy_copy,
     readlink, getcwd, split, join, startswith, isdigit, encode, decode, set_add, set_discard,
     FrameType, FunctionType, MethodType, CodeType, TracebackType, ModuleType, module_dict, dict_type, class_dict,
     type_mro,
     plain_ids, path_readers, owners, configured, sysmodules, runner_names, builtin_names, trusted_prefixes,
     test_paths, wrapper_kinds, callers, plugin_ids, boot_ids, exec_callers, protected_fns, genuine, trusted_codes,
     registry, state, busy, fd, EXIT, MISSING, sensitive, forbidden, configured_holders, boot_modules,
     repo_prefix, base_files, type_name, tb_of, tb_lineno, tb_next, begun, library_only, ctypes_prefixes,
     method_self, type_qualname, builtin_fn, test_namespaces, test_owners, lazy, handouts, frame_attrs,
     peek_paths) = S

    def emit(kind, fields):
        seq = state[0]
        state[0] = seq + 1
        data = encode(repr_((seq, kind) + fields), "utf-8", "backslashreplace")
        view = memoryview_(data + b"\t" + encode(hmac(__SEALED_KEY__, data, "sha256").hex(), "ascii") + b"\n")
        while len_(view):
            view = view[write(fd, view):]

    def tamper(what):
        try:
            emit("tamper", (what,))
        finally:
            exit_(EXIT)

    def plain(v):
        return dict_get(plain_ids, id_(type_(v)), None) is not None

    def resolve(path):
        # the absolute, link-free components of a path (as far as it exists); None when links loop
        if not startswith(path, "/"):
            path = getcwd() + "/" + path
        done = []
        todo = split(path, "/")
        todo.reverse()
        hops = 0
        while todo:
            part = todo.pop()
            if part == "" or part == ".":
                continue
            if part == "..":
                if done:
                    done.pop()
                continue
            try:
                target = readlink("/" + join("/", done + [part]))
            except OSError_:
                done.append(part)
                continue
            hops += 1
            if hops > 40:
                return None
            if startswith(target, "/"):
                done = []
            more = split(target, "/")
            more.reverse()
            todo.extend(more)
        return done

    def process_memory(parts):
        # /proc, /proc/<pid>, /proc/<pid>/task/<tid> (bases of relative opens) and their mem
        if parts is None:
            return True
        if not parts or parts[0] != "proc":
            return False
        rest = parts[1:]
        if not rest:
            return True
        if not (isdigit(rest[0]) or rest[0] == "self" or rest[0] == "thread-self"):
            return False
        rest = rest[1:]
        if len_(rest) and rest[0] == "task":
            rest = rest[2:]
        return len_(rest) == 0 or (len_(rest) == 1 and rest[0] == "mem")

    def opened(args):
        path = args[0] if len_(args) else None
        t = type_(path)
        if t is int_:
            return
        if t is bytes_:
            path = decode(path, "utf-8", "surrogateescape")
        elif t is not str_:
            reader = dict_get(path_readers, id_(t), None)
            if reader is None or reader[0] is not t:
                tamper("open of a path object of a type the core cannot read")
            path = reader[1](path)
            if type_(path) is not str_:
                tamper("open of a path object whose text is not a str")
        parts = split(path, "/")
        if parts[len_(parts) - 1] == "mem":
            tamper("open of a file named mem: " + path[:200])
        parts = resolve(path)
        if process_memory(parts):
            tamper("open of a process's memory or of a /proc folder: " + path[:200])
        if dict_get(peek_paths, "/" + join("/", parts), None) is not None and repo_on_stack(getframe(2)):
            tamper("the repository's code read a test file: " + path[:200])

    def code_of(frame):
        return f_code(frame)

    def repo_code(frame):
        # a frame running the repository's own code (not a test file the fix wrote, not a trusted folder)
        if frame is None:
            return False
        path = co_filename(code_of(frame))
        return type_(path) is str_ and startswith(path, repo_prefix) and dict_get(peek_paths, path, None) is None

    def repo_on_stack(frame):
        hops = 0
        while frame is not None and hops < 512:
            if repo_code(frame):
                return True
            frame = f_back(frame)
            hops += 1
        return False

    def frame_handout(caller, what):
        # the repository's code may not hold a frame: from one, f_back reaches the test's frame and its locals and
        # constants, the values the test expects (read directly, or through a standard-library function that
        # hands frames out: inspect.currentframe/stack/trace, traceback.walk_stack/walk_tb, logging.currentframe)
        if repo_code(caller):
            tamper(what + " from the repository's code (the test's frame is one f_back away)")
        if dict_get(handouts, co_name(code_of(caller)), None) is not None and repo_code(f_back(caller)):
            tamper(what + " handed to the repository's code by " + co_name(code_of(caller)))

    def from_library(frame):
        # the first frame below the event that is not the import system's or ctypes' own is in a trusted folder
        # (a dependency or the standard library), not the repository
        hops = 0
        while frame is not None and hops < 64:
            path = co_filename(code_of(frame))
            if type_(path) is not str_:
                return False
            if not (startswith(path, "<frozen importlib") or startswith(path, ctypes_prefixes)):
                return startswith(path, trusted_prefixes) and not startswith(path, repo_prefix)
            frame = f_back(frame)
            hops += 1
        return False

    def is_module_subclass(t):
        for base in type_mro(t):
            if base is ModuleType:
                return True
        return False

    def trusted_obj(v):
        # a function or plain class (metaclass `type`) whose every function is trusted code (a lazily imported
        # name a module caches: concurrent.futures.ThreadPoolExecutor)
        t = type_(v)
        if t is FunctionType:
            code = fn_code(v)
            return dict_get(trusted_codes, id_(code), None) is code
        if t is not type_:
            return False
        found = False
        for item in proxy_copy(class_dict(v)).values():
            if type_(item) is FunctionType:
                code = fn_code(item)
                if dict_get(trusted_codes, id_(code), None) is not code:
                    return False
                found = True
        return found

    def check(where):
        # the live state against the snapshot (see the module docstring)
        for owner, live, expected, copy in owners:
            now = copy(live)
            n = 0
            for k, v in now.items():
                if type_(k) is not str_:
                    tamper(where + ": a key that is not a str in " + owner)
                if dict_get(lazy, k, None) is not None:
                    continue
                old = dict_get(expected, k, MISSING)
                if old is MISSING:
                    if type_(v) is ModuleType or plain(v) or dict_get(configured, owner + "." + k, None) is not None:
                        continue
                    if trusted_obj(v):
                        continue
                    tamper(where + ": " + owner + "." + k + " was added")
                n += 1
                if old is v or old is None:
                    continue
                if plain(old) and plain(v):
                    continue
                base = dict_get(configured, owner + "." + k, None)
                if base is not None and (base[0] is MISSING or base[0] is v):
                    continue
                tamper(where + ": " + owner + "." + k + " was replaced")
            if n != len_(expected):
                tamper(where + ": an entry of " + owner + " was deleted")
        now = dict_copy(sysmodules)
        for name, mod in boot_modules.items():
            if dict_get(now, name, None) is not mod:
                tamper(where + ": sys.modules[" + repr_(name[:80]) + "] was replaced")
        for name, mod in now.items():
            if type_(name) is not str_:
                tamper(where + ": a module name that is not a str")
            if dict_get(runner_names, split(name, ".")[0], None) is None or mod is None:
                continue
            if dict_get(boot_modules, name, None) is mod:
                continue
            if type_(mod) is not ModuleType and not is_module_subclass(type_(mod)):
                tamper(where + ": sys.modules[" + repr_(name[:80]) + "] is not a module")
            md = module_dict(mod)
            path = dict_get(md, "__file__", None)
            if type_(path) is str_ and startswith(path, trusted_prefixes):
                continue
            if type_(path) is str_ and startswith(path, repo_prefix) and \
                    dict_get(base_files, path[len_(repo_prefix):], None) is not None:
                continue      # the project's own module of that name, there at the base commit
            if path is None and dict_get(builtin_names, name, None) is not None:
                continue
            where_from = dict_get(md, "__path__", None)
            if path is None and type_(where_from) is list_ and len_(where_from):
                for p in where_from:
                    if type_(p) is not str_ or not startswith(p, trusted_prefixes):
                        tamper(where + ": sys.modules[" + repr_(name[:80]) + "] is not the trusted package")
                continue
            tamper(where + ": sys.modules[" + repr_(name[:80]) + "] is not the trusted module")

    def genuine_fn(fn, nodeid):
        # the test the id names: its module's own function (or a library decorator, trusted code, around one),
        # and for a method, bound to an instance of the class the id names, which resolves the name to it
        parts = split(split(nodeid, "[")[0], "::")
        name = parts[len_(parts) - 1]
        owner = join(".", parts[1:len_(parts) - 1])
        t = type_(fn)
        if t is MethodType:
            cls = type_(method_self(fn))
            fn = method_func(fn)
            if not owner or type_qualname(cls) != owner:
                return "the method is bound to another class than the test's"
            found = None
            for c in type_mro(cls):
                found = class_dict(c).get(name, None)
                if found is not None:
                    break
            if found is not fn:
                return "the method is not the one the test's class has"
        elif owner:
            return "the test is a method, not a bound one"
        if type_(fn) is not FunctionType:
            return "the test is not a function"
        code = fn_code(fn)
        hit = dict_get(genuine, id_(code), None)
        if hit is not None and hit is code:
            return "" if co_name(code) == name else "the function is another test's"
        outer = dict_get(trusted_codes, id_(code), None)
        if outer is None or outer is not code:
            return "the function called is not the test module's"
        inner = fn
        hops = 0
        while hops < 8:
            d = dict_get(fn_dict(inner), "__wrapped__", None)
            if type_(d) is not FunctionType:
                break
            inner = d
            hops += 1
            code = fn_code(inner)
            hit = dict_get(genuine, id_(code), None)
            if hit is not None and hit is code:
                return "" if co_name(code) == name else "the function is another test's"
        return "the function called is not the test module's"

    def snapshot_tests():
        # after collection: every function, class and module the test modules bind (a rebinding is tampering)
        for path, ns in test_namespaces:
            kept = {}
            for k, v in dict_copy(ns).items():
                if type_(k) is str_ and (type_(v) is FunctionType or type_(v) is ModuleType or type_(v) is type_
                                         or type_(v) is builtin_fn):
                    kept[k] = v
            test_owners.append((path, ns, kept))

    def check_tests(where):
        for path, ns, kept in test_owners:
            for k, v in kept.items():
                if dict_get(ns, k, MISSING) is not v:
                    tamper(where + ": " + path[len_(repo_prefix):] + " no longer binds its " + k)

    def body(caller, args):
        if len_(args) != 2:
            tamper("body: malformed")
        nodeid, outcome = args
        if type_(nodeid) is not str_ or type_(outcome) is not str_:
            tamper("body: fields that are not str")
        if state[3] is None or state[3] != nodeid:
            tamper("body: for a test that is not the one running")
        if outcome != "ok":
            emit("body", (nodeid, "raised"))
            return
        kind = dict_get(wrapper_kinds, id_(code_of(caller)), None)
        if kind is None:
            tamper("body: ok from a frame that is not the sealed wrapper")
        loc = f_locals(caller)
        if type_(dict_get(loc, "_id", None)) is not str_ or dict_get(loc, "_id", None) != nodeid:
            tamper("body: ok for another test than the wrapper's")
        if kind == "sync":
            back = f_back(caller)
            if back is None or dict_get(callers, id_(code_of(back)), None) is None:
                tamper("body: the wrapper was not called by pytest or unittest")
        params = dict_get(registry, nodeid, None)
        if params is None:
            tamper("body: " + nodeid[:200] + " was never collected")
        why = genuine_fn(dict_get(loc, "_fn", None), nodeid)
        if why:
            emit("body", (nodeid, "unverified: " + why))
            return
        kw = dict_get(loc, "_kw", None)
        for pname, value in params:
            if type_(kw) is not dict_type or dict_get(kw, pname, MISSING) is not value:
                tamper("body: the parameters are not those collected")
        emit("body", (nodeid, "ok"))

    def protocol(caller, event, args):
        if event == "taskmine.body":
            return body(caller, args)
        cid = id_(code_of(caller))
        if event == "taskmine.end":
            if dict_get(boot_ids, cid, None) is None:
                tamper("end: not from the sealed process's own frame")
            check("at the end")
            emit("end", args)
            return
        if dict_get(plugin_ids, cid, None) is None:
            tamper(event + ": not from the sealed plug-in")
        if event == "taskmine.register":
            nodeid, params = args
            if type_(nodeid) is not str_ or type_(params) is not tuple_ or dict_get(registry, nodeid, None) is not None:
                tamper("register: malformed or twice")
            for pair in params:
                if type_(pair) is not tuple_ or len_(pair) != 2 or type_(pair[0]) is not str_:
                    tamper("register: malformed parameters")
            registry[nodeid] = params
            return
        if event == "taskmine.configured":
            if state[1]:
                tamper("configured twice")
            state[1] = 1
            for key, holder, attr in configured_holders:
                configured[key] = (holder.get(attr, None),)
            return
        if event == "taskmine.collected":
            ids = args[0] if len_(args) == 1 else None
            if type_(ids) is not tuple_:
                tamper("collected: malformed")
            for i in ids:
                if type_(i) is not str_:
                    tamper("collected: an id that is not a str")
            check("after collection")
            snapshot_tests()
            emit("collected", (ids,))
            return
        for a in args:
            if not plain(a):
                tamper(event + ": a field that is not plain data")
        # one test at a time, each once: begin, its reports and body, done (a record for another test, or a
        # test begun twice, is forged)
        nodeid = args[0] if len_(args) else None
        if event == "taskmine.begin":
            if state[3] is not None or dict_get(registry, nodeid, None) is None or \
                    dict_get(begun, nodeid, None) is not None:
                tamper("begin: out of order, not collected, or twice")
            begun[nodeid] = 1
            state[3] = nodeid
        elif event == "taskmine.report" or event == "taskmine.done":
            if state[3] is None or state[3] != nodeid:
                tamper(event[9:] + ": for a test that is not the one running")
        if event == "taskmine.done":
            check("after " + repr_(nodeid)[:200])
            check_tests("after " + repr_(nodeid)[:200])
            state[3] = None
        emit(event[9:], args)

    def executed(caller, args):
        code = args[0] if len_(args) else None
        if type_(code) is not CodeType:
            return
        path = co_filename(code)
        if type_(path) is not str_:
            return
        if dict_get(test_paths, path, None) is not None:
            into = genuine
        elif startswith(path, trusted_prefixes):
            into = trusted_codes
        else:
            return
        if caller is None or dict_get(exec_callers, id_(code_of(caller)), None) is None:
            return
        if into is genuine:       # the test module's namespace: exec(code, module.__dict__) from either caller
            loc = f_locals(caller)
            ns = None
            module = dict_get(loc, "module", None)
            if type_(module) is ModuleType:
                ns = module_dict(module)
            call_args = dict_get(loc, "args", None)
            if ns is None and type_(call_args) is tuple_ and len_(call_args) == 2 and type_(call_args[1]) is dict_type:
                ns = call_args[1]
            if ns is not None:
                test_namespaces.append((path, ns))
        todo = [code]
        while todo:
            c = todo.pop()
            into[id_(c)] = c
            for k in co_consts(c):
                if type_(k) is CodeType:
                    todo.append(k)

    def hook(event, args):
        tid = ident()
        if tid in busy:
            return
        set_add(busy, tid)
        was = gc_isenabled()
        gc_disable()
        try:
            if type_(event) is not str_:
                tamper("an audit event whose name is not a str")
            if type_(args) is not tuple_:
                tamper("audit arguments that are not a tuple")
            if startswith(event, "taskmine."):
                protocol(getframe(1), event, args)
            elif dict_get(sensitive, event, None) is not None:
                tamper(event)
            elif event == "open":
                opened(args)
            elif event == "exec":
                executed(getframe(1), args)
            elif event == "import":
                name = args[0] if len_(args) else None
                top = split(name, ".")[0] if type_(name) is str_ else ""
                if dict_get(forbidden, top, None) is not None:
                    tamper("import " + name)
                if dict_get(library_only, top, None) is not None and not from_library(getframe(1)):
                    tamper("import " + name + " by the repository's code")
            elif startswith(event, "ctypes."):
                if not from_library(getframe(1)):
                    tamper(event + " from the repository's code")
            elif event == "sys._getframe":
                frame_handout(getframe(1), "sys._getframe")
            elif event == "object.__getattr__":
                obj = args[0] if len_(args) else None
                attr = args[1] if len_(args) > 1 else None
                if dict_get(frame_attrs, attr, None) is not None:
                    frame_handout(getframe(1), "a read of " + attr)
                if (attr == "f_code" or attr == "__code__") and repo_code(getframe(1)):
                    read = code_of(obj) if type_(obj) is FrameType else (fn_code(obj) if type_(obj) is FunctionType
                                                                          else None)
                    if read is not None and dict_get(peek_paths, co_filename(read), None) is not None:
                        tamper("the repository's code read a test's code")
                if type_(obj) is FrameType and co_filename(code_of(obj)) == "<taskmine-sealed-core>":
                    tamper("a read of the core's frame")
                if type_(obj) is FunctionType and co_filename(fn_code(obj)) == "<taskmine-sealed-core>":
                    tamper("a read of the core's code")
                if type_(obj) is TracebackType and co_filename(code_of(tb_frame(obj))) == "<taskmine-sealed-core>":
                    tamper("a read of the core's frame")
            elif event == "object.__setattr__":
                obj = args[0] if len_(args) else None
                if type_(obj) is FunctionType and dict_get(protected_fns, id_(obj), None) is obj:
                    tamper("a change of a runner function's code or defaults")
            elif event == "sys.addaudithook":
                state[2] = 1
        except BaseException_ as e:
            # where, for a false alarm's diagnosis: the exception's type and the core's line numbers (C getters
            # only: an exception a signal handler raised here is the repository's object)
            tb = tb_of(e)
            lines = []
            while tb is not None and len_(lines) < 20:
                lines.append(tb_lineno(tb))
                tb = tb_next(tb)
            tamper("the core failed or was interrupted: " + type_name(type_(e)) + " at core lines " + repr_(lines))
        finally:
            if was:
                gc_enable()
            set_discard(busy, tid)
        if state[2]:
            state[2] = 0
            raise RuntimeError_("refused")

    return hook
'''


def _settings(fd: int) -> tuple[bytes, dict]:
    """(key, settings) from the parent's pipe: the key's hex on the first line, then JSON."""
    import json
    import os

    chunks = []
    while True:
        chunk = os.read(fd, 1 << 16)
        if not chunk:
            break
        chunks.append(chunk)
    os.close(fd)
    head, _, rest = b"".join(chunks).partition(b"\n")
    return bytes.fromhex(head.decode()), json.loads(rest)


class ImportGuard:
    """First on sys.meta_path: a top-level module that the trusted folders (the standard library, the runner,
    the environment) provide or that the standard library names is loaded from the trusted folders, unless the
    repository's file that shadows it existed at the base commit. Submodules follow their package."""

    def __init__(self, trusted: list[str], repo: str, base: set[str], names: set[str]):
        from importlib.machinery import PathFinder

        self.finder = PathFinder
        self.trusted = list(trusted)
        self.repo = repo.rstrip("/") + "/"
        self.base = set(base)
        self.names = set(names)

    def find_spec(self, fullname, path=None, target=None):
        if path is not None or "." in fullname:
            return None
        spec = self.finder.find_spec(fullname, sys.path)
        if spec is None:
            return None
        origin = spec.origin if spec.origin not in (None, "namespace") else \
            next(iter(spec.submodule_search_locations or []), None)
        if origin is None or not origin.startswith(self.repo):
            return None
        rel = origin[len(self.repo):]
        if rel in self.base or rel.rsplit("/", 1)[0] + "/" in self.base:
            return None
        trusted = self.finder.find_spec(fullname, self.trusted)
        if trusted is not None:
            return trusted
        if fullname in self.names:
            raise ModuleNotFoundError(f"{fullname} is a module of the standard library or of the test runner; the "
                                      f"repository's {rel} does not stand in for it", name=fullname)
        return None


def _protected(name: str) -> bool:
    top = name.partition(".")[0]
    return top in RUNNER_TOPS or top in sys.stdlib_module_names and name not in ("__main__", "sys")


def snapshot() -> tuple[list, dict, list, list]:
    """(owners, protected functions by id, configured holders, volatile names) for the modules loaded now: each
    owner is (name, live mapping, expected copy, copier)."""
    import types

    proxy_copy = type(type.__dict__).copy
    owners, fns, holders, volatile = [], {}, [], []
    seen: set[int] = set()

    def add_class(owner: str, cls: type) -> None:
        if id(cls) in seen:
            return
        seen.add(id(cls))
        name = f"{owner}.{cls.__qualname__}"
        proxy = cls.__dict__
        owners.append((name, proxy, {k: v for k, v in proxy.items() if k not in LAZY}, proxy_copy))
        for attr in CONFIGURED.get(name, ()):
            holders.append((f"{name}.{attr}", proxy, attr))
        for v in list(proxy.values()):
            visit(owner, v)

    def visit(owner: str, v) -> None:
        if isinstance(v, (staticmethod, classmethod)):
            v = v.__func__
        if isinstance(v, property):
            for f in (v.fget, v.fset, v.fdel):
                if type(f) is types.FunctionType:
                    fns[id(f)] = f
        elif type(v) is types.FunctionType:
            fns[id(v)] = v
        elif isinstance(v, type) and getattr(v, "__module__", None) == owner:
            add_class(owner, v)

    for name, mod in sorted(sys.modules.items()):
        if mod is None or type(mod) is not types.ModuleType or not _protected(name):
            continue
        d = mod.__dict__
        owners.append((name, d, {k: v for k, v in d.items() if k not in LAZY}, dict.copy))
        for attr in VOLATILE.get(name, ()):
            volatile.append(f"{name}.{attr}")
        for v in list(d.values()):
            visit(name, v)
    return owners, fns, holders, volatile


def _path_readers() -> dict:
    """id(type) -> (type, reader): how the core reads the text of a path object passed to open() (the call made
    it a str already; a type the core cannot read is tampering)."""
    import os
    import pathlib

    out = {}
    slot = pathlib.PurePath.__dict__.get("_str")
    if slot is not None and hasattr(slot, "__get__"):
        for t in (pathlib.PurePath, pathlib.PurePosixPath, pathlib.Path, pathlib.PosixPath):
            out[id(t)] = (t, slot.__get__)
    out[id(os.DirEntry)] = (os.DirEntry, os.DirEntry.__dict__["path"].__get__)
    try:
        from _pytest._py.path import LocalPath
    except ImportError:
        return out
    getter = next((c.__dict__["__dict__"] for c in LocalPath.__mro__ if "__dict__" in c.__dict__), None)
    if getter is not None:
        get = getter.__get__
        out[id(LocalPath)] = (LocalPath, lambda p, get=get, dget=dict.get: dget(get(p), "strpath"))
    return out


def sealed_wrapper(nodeid: str, fn, audit):
    """The test function wrapped so that its own return (or raise) reaches the core (see the module docstring)."""
    import functools
    import inspect

    if inspect.iscoroutinefunction(fn):
        async def sealed_acall(*args, **kwargs):
            _id, _fn, _kw, _audit = nodeid, fn, kwargs, audit
            try:
                _result = await _fn(*args, **kwargs)
            except BaseException:
                _audit("taskmine.body", _id, "raised")
                raise
            _audit("taskmine.body", _id, "ok")
            return _result
        wrapper = sealed_acall
    else:
        def sealed_call(*args, **kwargs):
            _id, _fn, _kw, _audit = nodeid, fn, kwargs, audit
            try:
                _result = _fn(*args, **kwargs)
            except BaseException:
                _audit("taskmine.body", _id, "raised")
                raise
            # unittest catches a failing subTest inside the method: its outcome says so
            _outcome = getattr(getattr(_fn, "__self__", None), "_outcome", None)
            _audit("taskmine.body", _id, "raised" if getattr(_outcome, "success", True) is False else "ok")
            return _result
        wrapper = sealed_call
    try:
        functools.update_wrapper(wrapper, fn)
    except (AttributeError, TypeError):
        pass
    return wrapper


class Sealed:
    """The pytest plug-in that reports to the core (see the module docstring)."""

    def __init__(self, audit, test_paths=()):
        self.audit = audit
        self.test_paths = frozenset(test_paths)

    def pytest_sessionstart(self, session):
        self.audit("taskmine.configured")

    def pytest_collection_finish(self, session):
        from _pytest.python import DirectParamFixtureDef

        ids = []
        for item in session.items:
            params = ()
            spec = getattr(item, "callspec", None)
            defs = getattr(getattr(item, "_fixtureinfo", None), "name2fixturedefs", {})
            if spec is not None:
                params = tuple((name, value) for name, value in spec.params.items()
                               if any(isinstance(d, DirectParamFixtureDef) for d in defs.get(name, ())))
            self.audit("taskmine.register", item.nodeid, params)
            ids.append(item.nodeid)
        self.audit("taskmine.collected", tuple(ids))

    def pytest_collectreport(self, report):
        if report.failed:
            self.audit("taskmine.collecterror", report.nodeid, _message(report))

    def pytest_runtest_protocol(self, item, nextitem):
        import linecache

        for path in [p for p in linecache.cache if p in self.test_paths]:
            linecache.cache.pop(path, None)     # a failure's traceback read them: no copy for the next test
        self.audit("taskmine.begin", item.nodeid)
        yield
        self.audit("taskmine.done", item.nodeid)

    def pytest_runtest_call(self, item):
        fn = item.obj
        item.obj = sealed_wrapper(item.nodeid, fn, self.audit)
        try:
            yield
        finally:
            item.obj = fn

    def pytest_runtest_logreport(self, report):
        self.audit("taskmine.report", report.nodeid, report.when, report.outcome,
                   bool(getattr(report, "wasxfail", None) is not None), _message(report) if report.failed else "")


def _message(report) -> str:
    """The failure's one line and the last `E` line of its traceback (what a problem statement quotes)."""
    try:
        crash = getattr(getattr(report, "longrepr", None), "reprcrash", None)
        message = str(getattr(crash, "message", "") or "")
        text = str(report.longreprtext or "")
    except Exception:
        return "the failure could not be described"
    errors = [line[1:].strip() for line in text.splitlines() if line.startswith("E ")]
    if errors and errors[-1] not in message:
        message = f"{message}: {errors[-1]}" if message else errors[-1]
    return (message or text[-500:])[:2000]


class Guard:
    """Per-test limits: a TimeoutError after `seconds` (SIGALRM) instead of the whole run being killed."""

    def __init__(self, seconds: int):
        self.seconds = seconds

    def pytest_runtest_call(self, item):
        import signal

        def expire(signum, frame):
            raise TimeoutError(f"the test ran longer than {self.seconds} seconds")
        old = signal.signal(signal.SIGALRM, expire)
        signal.alarm(self.seconds)
        try:
            yield
        finally:
            signal.alarm(0)
            signal.signal(signal.SIGALRM, old)


def _hookimpls():
    """Mark the plug-ins' hooks (done here: pytest is imported only once sys.path is set)."""
    import pytest

    Sealed.pytest_sessionstart = pytest.hookimpl(trylast=True)(Sealed.pytest_sessionstart)
    Sealed.pytest_runtest_protocol = pytest.hookimpl(hookwrapper=True, tryfirst=True)(Sealed.pytest_runtest_protocol)
    Sealed.pytest_runtest_call = pytest.hookimpl(hookwrapper=True, tryfirst=True)(Sealed.pytest_runtest_call)
    Guard.pytest_runtest_call = pytest.hookimpl(hookwrapper=True)(Guard.pytest_runtest_call)


EQUALITY = r"""
class _taskmine_Unequal:
    __slots__ = ()
    __hash__ = object.__hash__


def _taskmine_anything(x, depth=0, budget=None):
    # `budget`: values left to look at in this comparison (a deep structure costs at most BUDGET probes)
    budget = [10000] if budget is None else budget
    budget[0] -= 1
    if budget[0] < 0:
        return False
    probe = _taskmine_Unequal()
    try:
        if bool(x == probe) or not bool(x != probe):
            return True
    except Exception:
        pass
    if depth < 3:
        try:
            if isinstance(x, dict):
                items = [v for pair in list(x.items())[:1000] for v in pair]
            elif isinstance(x, (list, tuple, set, frozenset)):
                items = list(x)[:1000]
            else:
                return False
        except Exception:
            return False
        for v in items:
            if _taskmine_anything(v, depth + 1, budget):
                return True
    return False


def _taskmine_compare(op, a, b):
    result = a == b if op == "Eq" else a != b
    try:
        equal = bool(result) if op == "Eq" else not bool(result)
    except Exception:
        return result
    if equal and (_taskmine_anything(a) or _taskmine_anything(b)):
        raise AssertionError("an operand compares equal to anything (a value no computation can equal)")
    return result


def _taskmine_checked(name, orig):
    def check(self, first, second, *args, **kwargs):
        orig(self, first, second, *args, **kwargs)
        if _taskmine_anything(first) or _taskmine_anything(second):
            raise self.failureException(name + ": an operand compares equal to anything")
    check.__name__ = check.__qualname__ = name
    return check
"""


def _seal_equality() -> None:
    """An object equal to anything (its `__eq__` says True, mock.ANY) passes any equality a test asserts without
    computing anything. Before the snapshot, every `==`/`!=` of a test module (pytest rewrites them:
    `rewrite_asserts` is wrapped to route them through `_taskmine_compare`) and unittest's equality assertions
    also ask whether either side, or a value inside it, equals a fresh object nothing can know: such an operand
    fails the assertion. The helpers live in `_pytest.assertion.rewrite`'s namespace, which the snapshot covers."""
    import ast
    import unittest.case

    import _pytest.assertion.rewrite as rw

    exec(EQUALITY, rw.__dict__)
    orig = rw.rewrite_asserts

    class Compares(ast.NodeTransformer):
        def visit_Compare(self, node):
            self.generic_visit(node)
            if len(node.ops) != 1 or type(node.ops[0]) not in (ast.Eq, ast.NotEq):
                return node
            name, const = ast.Name("@pytest_ar", ast.Load()), ast.Constant(type(node.ops[0]).__name__)
            fn = ast.Attribute(name, "_taskmine_compare", ast.Load())
            call = ast.Call(fn, [const, node.left, node.comparators[0]], [])
            # every new node at the comparison's place, its end included: pytest's own rewritten nodes may carry a
            # start and no end, and fix_missing_locations would then give them an end before their start
            line, col = getattr(node, "lineno", None), getattr(node, "col_offset", None) or 0
            if line is None:        # a node without a place cannot be compiled in another one's
                return node
            end_line = max(getattr(node, "end_lineno", None) or line, line)
            end_col = getattr(node, "end_col_offset", None)
            if end_col is None or (end_line == line and end_col < col):
                end_col = col
            for new in (call, fn, name, const):
                new.lineno, new.col_offset, new.end_lineno, new.end_col_offset = line, col, end_line, end_col
            return call

    def rewrite_asserts(mod, *args, **kwargs):
        orig(mod, *args, **kwargs)
        imported = any(isinstance(n, ast.Import) and any(a.asname == "@pytest_ar" for a in n.names)
                       for n in mod.body)
        if imported:
            Compares().visit(mod)       # no fix_missing_locations: it would give pytest's nodes false ends

    rewrite_asserts.__wrapped__ = orig
    rw.rewrite_asserts = rewrite_asserts
    case = unittest.case.TestCase
    for name in ("assertEqual", "assertNotEqual", "assertListEqual", "assertTupleEqual", "assertDictEqual",
                 "assertSetEqual", "assertSequenceEqual", "assertCountEqual", "assertAlmostEqual"):
        orig_fn = case.__dict__.get(name)
        if orig_fn is not None:
            setattr(case, name, rw._taskmine_checked(name, orig_fn))


def _neutralize_posixsubprocess() -> None:
    """`_posixsubprocess.fork_exec` starts a process without an audit event: no module keeps a reference to it
    (subprocess raises its own audit event first, which the core refuses), and importing it again is refused."""
    mod = sys.modules.pop("_posixsubprocess", None)
    if mod is None:
        return

    def fork_exec(*args, **kwargs):
        sys.audit("subprocess.Popen", None, None, None, None)
        raise PermissionError("starting a process is not allowed in the sealed test process")

    for m in list(sys.modules.values()):
        d = getattr(m, "__dict__", None)
        if not isinstance(d, dict):
            continue
        for k, v in list(d.items()):
            if v is mod:
                d[k] = None
            elif v is getattr(mod, "fork_exec", None):
                d[k] = fork_exec


def main() -> None:
    import _thread
    import gc
    import importlib
    import os
    import types

    settings_fd, record_fd = int(sys.argv[1]), int(sys.argv[2])
    key, cfg = _settings(settings_fd)
    sys.dont_write_bytecode = True
    repo = cfg["repo"]

    # 2. sys.path: the standard library (already there) and the trusted site folders, their .pth included
    import site

    for d in cfg["site_dirs"]:
        site.addsitedir(d)
    trusted = [p for p in sys.path if p]

    # 3. the import guard
    runner_names = set(sys.stdlib_module_names) | set(RUNNER_TOPS) | set(cfg.get("runner_names") or ())
    sys.meta_path.insert(0, ImportGuard(trusted, repo, set(cfg.get("base") or ()), runner_names))

    # 4. the runner and the environment's plug-ins
    import threading

    if cfg.get("thread_stack"):
        threading.stack_size(cfg["thread_stack"])
    import _pytest.config
    import _pytest.python
    import pytest

    for name in (*_pytest.config.default_plugins, "legacypath", "pytester"):
        try:
            importlib.import_module(f"_pytest.{name}")
        except ImportError:
            pass
    for name in ("unittest", "unittest.mock", "unittest.async_case", "xml.etree.ElementTree", "doctest",
                 "pathlib", "inspect", "functools"):
        importlib.import_module(name)
    for name in cfg.get("plugins") or ():
        importlib.import_module(name)
    _hookimpls()
    _seal_equality()
    _neutralize_posixsubprocess()

    # 5. the snapshot
    import unittest.async_case
    import unittest.case

    plain_ids = {id(t): t for t in (type(None), bool, int, float, complex, str, bytes)}
    owners, protected_fns, holders, volatile = snapshot()
    missing = object()
    configured = {name: (missing,) for name, _, _ in holders}   # any value until the session starts
    configured.update({name: (missing,) for name in volatile})  # any value, always
    boot_modules = {n: m for n, m in sys.modules.items() if m is not None and _protected(n)}

    # 6. the core
    audit = sys.audit
    wrapper_kinds = {id(sealed_wrapper("x", lambda: None, audit).__code__): "sync",
                     id(sealed_wrapper("x", _async_probe, audit).__code__): "async"}
    plugin_ids = {id(f.__code__): 1 for f in (Sealed.pytest_sessionstart, Sealed.pytest_collection_finish,
                                               Sealed.pytest_collectreport, Sealed.pytest_runtest_protocol,
                                               Sealed.pytest_runtest_logreport)}
    callers = {id(_pytest.python.pytest_pyfunc_call.__code__): 1,
               id(unittest.case.TestCase._callTestMethod.__code__): 1,
               id(unittest.async_case.IsolatedAsyncioTestCase._callMaybeAsync.__code__): 1}
    import importlib._bootstrap

    import _pytest.assertion.rewrite

    exec_callers = {id(importlib._bootstrap._call_with_frames_removed.__code__): 1,
                    id(_pytest.assertion.rewrite.AssertionRewritingHook.exec_module.__code__): 1}
    trusted_prefixes = tuple(p.rstrip("/") + "/" for p in trusted)
    trusted_codes: dict = {}
    for f in protected_fns.values():
        todo = [f.__code__]
        while todo:
            c = todo.pop()
            trusted_codes[id(c)] = c
            todo += [k for k in c.co_consts if type(k) is types.CodeType]
    test_paths = {os.path.join(repo, p): 1 for p in cfg.get("test_files") or ()}
    # the test modules among them: a module of the code that holds doctests (more_itertools/more.py) is a test file
    # too, but the repository's code imports it, runs in it and may read it (inspect.getsource) like any other
    peek_paths = {p: 1 for p in test_paths if is_test_module(os.path.relpath(p, repo))}
    ft, ct = types.FrameType, types.CodeType
    S = (type, str, bytes, int, tuple, list, len, repr, id, memoryview, OSError, BaseException, RuntimeError,
         os.write, os._exit, _hmac_digest(), _thread.get_ident, sys._getframe, ft.f_code.__get__, ft.f_back.__get__,
         ft.f_locals.__get__, types.TracebackType.tb_frame.__get__, types.FunctionType.__code__.__get__,
         types.FunctionType.__dict__["__dict__"].__get__, types.MethodType.__func__.__get__, ct.co_filename.__get__,
         ct.co_name.__get__, ct.co_consts.__get__, gc.isenabled, gc.disable, gc.enable, dict.get, dict.copy,
         type(type.__dict__).copy, os.readlink, os.getcwd, str.split, str.join, str.startswith, str.isdigit,
         str.encode, bytes.decode, set.add, set.discard, ft, types.FunctionType, types.MethodType, ct,
         types.TracebackType, types.ModuleType, types.ModuleType.__dict__["__dict__"].__get__, dict,
         type.__dict__["__dict__"].__get__, type.__dict__["__mro__"].__get__,
         plain_ids, _path_readers(), owners, configured, sys.modules, {n: 1 for n in runner_names},
         {n: 1 for n in sys.builtin_module_names}, trusted_prefixes, test_paths, wrapper_kinds, callers, plugin_ids,
         {id(sys._getframe().f_code): 1}, exec_callers, protected_fns, {}, trusted_codes, {}, [0, 0, 0, None], set(),
         record_fd, TAMPER_EXIT, missing, {e: 1 for e in SENSITIVE}, {n: 1 for n in FORBIDDEN_IMPORTS}, holders,
         boot_modules, repo.rstrip("/") + "/", {p: 1 for p in cfg.get("base") or ()},
         type.__dict__["__name__"].__get__, BaseException.__traceback__.__get__,
         types.TracebackType.tb_lineno.__get__, types.TracebackType.tb_next.__get__, {},
         {n: 1 for n in LIBRARY_ONLY_IMPORTS},
         tuple(os.path.join(p, name) + "/" for p in trusted for name in ("ctypes", "importlib")),
         types.MethodType.__self__.__get__, type.__dict__["__qualname__"].__get__, types.BuiltinFunctionType, [], [],
         {n: 1 for n in LAZY}, {n: 1 for n in HANDOUTS}, {n: 1 for n in FRAME_ATTRS}, peek_paths)
    src = CORE.replace(KEY_TOKEN, repr(key))
    namespace: dict = {"__builtins__": {}}
    exec(compile(src, CORE_FILE, "exec"), namespace)
    hook = namespace["make"](S)
    del src, namespace, key, S
    sys.addaudithook(hook)
    del hook
    gc.collect()

    # the repository
    import resource

    sys.path.insert(0, repo)
    memory = cfg.get("memory")
    if memory:
        resource.setrlimit(resource.RLIMIT_DATA, (memory, memory))
    plugins = [Sealed(audit, peek_paths), Guard(int(cfg.get("per_test_s") or 20))]
    args = list(cfg["pytest_args"])
    try:
        status = pytest.main(args, plugins=plugins)
    except BaseException as exc:
        status = f"pytest raised {type(exc).__name__}"
    audit("taskmine.end", str(int(status)) if isinstance(status, int) else str(status))
    os._exit(0)


async def _async_probe():
    return None


def _hmac_digest():
    """HMAC as one C function (`_hashlib.hmac_digest`), or the standard library's when OpenSSL is absent."""
    try:
        from _hashlib import hmac_digest
        return hmac_digest
    except ImportError:
        import hmac
        return hmac.digest


if __name__ == "__main__":
    main()
