"""A pickle reader for untrusted files that builds data and nothing else (PyTorch's `weights_only`
unpickler does the same job in PyTorch).

It interprets the opcodes of pickle protocols 0-5 that data needs: numbers, strings, bytes, None, bools,
tuples, lists, dicts, sets, memo references, persistent ids, and a call (REDUCE) only of the callables
the caller's `find_class` hands out wrapped in `Callable`. It never calls an object the file names by
itself, never sets attributes on anything but a fresh `OrderedDict` (BUILD), keeps its memo in a dict
(an index in the file costs no memory), and checks every length against the bytes left, so memory stays
proportional to the file. Anything else is a `PickleRefused` naming what the file asked for.
"""
import collections
import struct


class PickleRefused(ValueError):
    """The pickle asks for something this reader does not build, or is malformed."""


class Callable:
    """A callable `find_class` allows a pickle to call (REDUCE) with a tuple of arguments."""

    __slots__ = ("fn", "name")

    def __init__(self, fn, name):
        self.fn, self.name = fn, name

    def __repr__(self):
        return self.name


class Tag:
    """A named global a pickle may mention but not call (a storage type in a persistent id)."""

    __slots__ = ("value", "name")

    def __init__(self, value, name):
        self.value, self.name = value, name

    def __repr__(self):
        return self.name


_MARK = object()


class Reader:
    """`Reader(data, find_class, persistent_load, build).load()`: the object the pickle bytes `data`
    describe.

    `find_class(module, name)` returns a `Callable`, a `Tag` or a plain value (a dtype), or raises;
    `persistent_load(pid)` returns what a persistent id stands for; `build(inst, state)`, if given,
    sets the state of an object the caller's callables made (BUILD), returning False for any other."""

    def __init__(self, data, find_class, persistent_load, build=None):
        self.data, self.pos = memoryview(data), 0
        self.find_class, self.persistent_load, self.build = find_class, persistent_load, build
        self.stack, self.marks, self.memo = [], [], {}

    # -- reading the byte stream --------------------------------------------------------------------
    def _take(self, n):
        if n < 0 or self.pos + n > len(self.data):
            raise PickleRefused(f"a pickle record at byte {self.pos} needs {n} bytes; only"
                                f" {len(self.data) - self.pos} remain")
        out = self.data[self.pos:self.pos + n]
        self.pos += n
        return out

    def _unpack(self, fmt):
        return struct.unpack(fmt, self._take(struct.calcsize(fmt)))[0]

    def _line(self):
        end = bytes(self.data[self.pos:self.pos + (1 << 16)]).find(b"\n")
        if end < 0:
            raise PickleRefused(f"a text record at byte {self.pos} has no end of line")
        return bytes(self._take(end + 1)[:-1])

    def _text(self, n):
        try:
            return str(self._take(n), "utf-8", "surrogatepass")
        except UnicodeDecodeError as exc:
            raise PickleRefused(f"a string at byte {self.pos - n} is not UTF-8 ({exc.reason})") from None

    # -- the stack --------------------------------------------------------------------------------
    def _pop(self):
        if not self.stack or self.stack[-1] is _MARK:
            raise PickleRefused(f"a record at byte {self.pos} pops an empty stack")
        return self.stack.pop()

    def _pop_mark(self):
        if not self.marks:
            raise PickleRefused(f"a record at byte {self.pos} needs a MARK that is not there")
        at = self.marks.pop()
        items = self.stack[at + 1:]
        del self.stack[at:]
        return items

    def _top(self, kind):
        if not self.stack or not isinstance(self.stack[-1], kind):
            raise PickleRefused(f"a record at byte {self.pos} adds to a {_name(self.stack[-1] if self.stack else None)}"
                                f", not a {kind.__name__}")
        return self.stack[-1]

    def _memo_get(self, key):
        if key not in self.memo:
            raise PickleRefused(f"a record at byte {self.pos} refers to memo entry {key}, never stored")
        self.stack.append(self.memo[key])

    def _memo_put(self, key):
        if not self.stack or self.stack[-1] is _MARK:
            raise PickleRefused(f"a record at byte {self.pos} stores an empty stack in the memo")
        self.memo[key] = self.stack[-1]

    # -- the opcodes ------------------------------------------------------------------------------
    def load(self):
        """The object the pickle describes; PickleRefused for anything but data."""
        ops = _OPS
        while True:
            op = self._take(1)[0]
            handler = ops.get(op)
            if handler is None:
                raise PickleRefused(f"pickle opcode {bytes([op])!r} at byte {self.pos - 1} is not one that data "
                                    f"needs")
            if handler is _stop:
                if len(self.stack) != 1 or self.marks:
                    raise PickleRefused("the pickle stops with a malformed stack")
                return self.stack.pop()
            handler(self)


def _name(value):
    return "nothing" if value is None else type(value).__name__


def _stop(r):
    pass


def _mark(r):
    r.marks.append(len(r.stack))
    r.stack.append(_MARK)


def _reduce(r):
    args, fn = r._pop(), r._pop()
    if not isinstance(fn, Callable):
        raise PickleRefused(f"the pickle calls a {_name(fn)}, which is not a callable it may use")
    if not isinstance(args, tuple):
        raise PickleRefused(f"the pickle calls {fn.name} with {_name(args)}, not a tuple of arguments")
    try:
        r.stack.append(fn.fn(*args))
    except PickleRefused:
        raise
    except (TypeError, ValueError, OverflowError) as exc:
        raise PickleRefused(f"{fn.name}(...): {exc}") from None


def _build(r):
    state, inst = r._pop(), r._pop()
    # PyTorch's state dicts carry `_metadata` as an attribute of their OrderedDict; the caller's hook
    # builds what its own callables made (NumPy arrays); nothing else may have its state set.
    if type(inst) is collections.OrderedDict and isinstance(state, dict) and all(isinstance(k, str) for k in state):
        inst.__dict__.update(state)
    elif r.build is None or not r.build(inst, state):
        raise PickleRefused(f"the pickle sets the state of a {_name(inst)} (BUILD) with {_name(state)}: only a "
                            f"state dict's attributes and arrays this file made may be set")
    r.stack.append(inst)


def _global(module, name, r):
    value = r.find_class(module, name)
    r.stack.append(value)


def _text_global(r):
    module, name = r._line().decode("utf-8", "replace"), r._line().decode("utf-8", "replace")
    _global(module, name, r)


def _stack_global(r):
    name, module = r._pop(), r._pop()
    if not isinstance(module, str) or not isinstance(name, str):
        raise PickleRefused("STACK_GLOBAL needs two strings")
    _global(module, name, r)


def _newobj(r):
    args, cls = r._pop(), r._pop()
    if isinstance(cls, Callable) and cls.fn is collections.OrderedDict and args == ():
        r.stack.append(collections.OrderedDict())
        return
    raise PickleRefused(f"the pickle makes a new object of {cls if isinstance(cls, (Callable, Tag)) else _name(cls)}"
                        f" (NEWOBJ): only data is loaded")


def _setitems(r):
    items = r._pop_mark()
    target = r._top(dict)
    if len(items) % 2:
        raise PickleRefused(f"SETITEMS at byte {r.pos} has an odd number of items")
    for i in range(0, len(items), 2):
        _set(target, items[i], items[i + 1])


def _setitem(r):
    value, key = r._pop(), r._pop()
    _set(r._top(dict), key, value)


_KEYS = (str, int, float, complex, bytes, type(None))


def _key(key):
    """`key` when it is a number, string, bytes, None or a flat tuple of them (hashing anything deeper
    could recurse without bound); PickleRefused otherwise."""
    if isinstance(key, _KEYS) or (type(key) is tuple and all(isinstance(k, _KEYS) for k in key)):
        return key
    raise PickleRefused(f"a dict key or set item is a {_name(key)}; data has numbers, strings or flat tuples "
                        f"of them there")


def _set(target, key, value):
    target[_key(key)] = value


def _additems(r):
    items = r._pop_mark()
    r._top(set).update(_key(k) for k in items)


def _hashable(build, items):
    return build(_key(k) for k in items)


def _dict_from(items):
    if len(items) % 2:
        raise PickleRefused("DICT has an odd number of items")
    out = {}
    for i in range(0, len(items), 2):
        _set(out, items[i], items[i + 1])
    return out


def _long(raw):
    return int.from_bytes(raw, "little", signed=True)


def _text_int(r):
    line = r._line()
    if line in (b"00", b"01"):
        r.stack.append(line == b"01")
        return
    r.stack.append(_parse(int, line.rstrip(b"L")))


def _parse(kind, text):
    try:
        return kind(text)
    except ValueError:
        raise PickleRefused(f"{text[:40]!r} is not a {kind.__name__}") from None


def _unescape(line):
    try:
        return line.decode("raw-unicode-escape")
    except UnicodeDecodeError as exc:
        raise PickleRefused(f"a text string is malformed ({exc.reason})") from None


def _append(r):
    value = r._pop()
    r._top(list).append(value)


def _appends(r):
    items = r._pop_mark()
    r._top(list).extend(items)


def _persid(r, pid):
    r.stack.append(r.persistent_load(pid))


_OPS = {
    ord("."): _stop,
    0x80: lambda r: r._take(1),                                     # PROTO
    0x95: lambda r: r._take(8),                                     # FRAME (the bytes are already here)
    ord("("): _mark,
    ord("0"): lambda r: r._pop() if r.stack and r.stack[-1] is not _MARK else r._pop_mark(),
    ord("1"): lambda r: r._pop_mark(),                              # POP_MARK
    ord("2"): lambda r: r.stack.append(r.stack[-1] if r.stack else r._pop()),   # DUP
    ord("N"): lambda r: r.stack.append(None),
    0x88: lambda r: r.stack.append(True),
    0x89: lambda r: r.stack.append(False),
    ord("J"): lambda r: r.stack.append(r._unpack("<i")),            # BININT
    ord("K"): lambda r: r.stack.append(r._unpack("<B")),            # BININT1
    ord("M"): lambda r: r.stack.append(r._unpack("<H")),            # BININT2
    0x8a: lambda r: r.stack.append(_long(r._take(r._unpack("<B")))),            # LONG1
    0x8b: lambda r: r.stack.append(_long(r._take(r._unpack("<i")))),            # LONG4
    ord("I"): _text_int,
    ord("L"): _text_int,
    ord("G"): lambda r: r.stack.append(r._unpack(">d")),            # BINFLOAT
    ord("F"): lambda r: r.stack.append(_parse(float, r._line())),
    ord("X"): lambda r: r.stack.append(r._text(r._unpack("<I"))),   # BINUNICODE
    0x8c: lambda r: r.stack.append(r._text(r._unpack("<B"))),       # SHORT_BINUNICODE
    0x8d: lambda r: r.stack.append(r._text(r._unpack("<Q"))),       # BINUNICODE8
    ord("V"): lambda r: r.stack.append(_unescape(r._line())),      # UNICODE
    ord("B"): lambda r: r.stack.append(bytes(r._take(r._unpack("<I")))),        # BINBYTES
    ord("C"): lambda r: r.stack.append(bytes(r._take(r._unpack("<B")))),        # SHORT_BINBYTES
    0x8e: lambda r: r.stack.append(bytes(r._take(r._unpack("<Q")))),            # BINBYTES8
    ord(")"): lambda r: r.stack.append(()),
    ord("t"): lambda r: r.stack.append(tuple(r._pop_mark())),
    0x85: lambda r: r.stack.append((r._pop(),)),
    0x86: lambda r: r.stack.append(tuple(reversed((r._pop(), r._pop())))),
    0x87: lambda r: r.stack.append(tuple(reversed((r._pop(), r._pop(), r._pop())))),
    ord("]"): lambda r: r.stack.append([]),
    ord("l"): lambda r: r.stack.append(r._pop_mark()),
    ord("a"): _append,
    ord("e"): _appends,
    ord("}"): lambda r: r.stack.append({}),
    ord("d"): lambda r: r.stack.append(_dict_from(r._pop_mark())),
    ord("s"): _setitem,
    ord("u"): _setitems,
    0x8f: lambda r: r.stack.append(set()),
    0x90: _additems,
    0x91: lambda r: r.stack.append(_hashable(frozenset, r._pop_mark())),
    ord("c"): _text_global,
    0x93: _stack_global,
    ord("R"): _reduce,
    ord("b"): _build,
    0x81: _newobj,
    ord("Q"): lambda r: _persid(r, r._pop()),                       # BINPERSID
    ord("P"): lambda r: _persid(r, r._line().decode("ascii", "replace")),
    ord("h"): lambda r: r._memo_get(r._unpack("<B")),               # BINGET
    ord("j"): lambda r: r._memo_get(r._unpack("<I")),               # LONG_BINGET
    ord("g"): lambda r: r._memo_get(_parse(int, r._line())),        # GET
    ord("q"): lambda r: r._memo_put(r._unpack("<B")),               # BINPUT
    ord("r"): lambda r: r._memo_put(r._unpack("<I")),               # LONG_BINPUT
    ord("p"): lambda r: r._memo_put(_parse(int, r._line())),        # PUT
    0x94: lambda r: r._memo_put(len(r.memo)),                       # MEMOIZE
}
