"""Exact fingerprints of NumPy and pandas objects (see :mod:`._exact`): buffers read whole,
object elements through the same reader, with NumPy's and pandas' own code only."""

from __future__ import annotations

import struct
from typing import Any

from ._exact_base import _T_MODULE, _T_MRO, Reading, _CannotTell, _describe

#: Bytes hashed from a copy at a time when an array is not contiguous.
CHUNK = 4 * 1024 * 1024


def _cannot(kind: type) -> Exception:
    return _CannotTell(f"an object of type {_describe(kind)}")


def read_numpy(reader: Reading, value: Any, kind: type) -> None:
    """An ndarray (exactly that type), a NumPy scalar, or a dtype."""
    import numpy as np

    if kind is np.ndarray:
        read_array(reader, value)
        return
    mro = _T_MRO.__get__(kind)
    module = _T_MODULE.__get__(kind)
    if np.generic in mro and type(module) is str and module.startswith("numpy"):
        if value.dtype.hasobject:
            raise _cannot(kind)
        data = value.tobytes()
        reader.spend(len(data))
        reader.put(b"g", value.dtype.str.encode() + b"|" + data)
    elif np.dtype in mro:
        reader.atom(value)  # immutable
    else:
        raise _cannot(kind)  # an ndarray subclass (matrix, memmap, masked) or another type


def read_array(reader: Reading, array: Any) -> None:
    """dtype, shape and every byte of the buffer (C order); an object array element by element."""
    import numpy as np

    dtype = array.dtype
    fields = repr(dtype.descr) if dtype.fields else ""
    reader.put(b"N", f"{dtype.str}|{fields}|{array.shape}".encode())
    if dtype.hasobject:
        if dtype.kind != "O":  # a structured dtype with objects in it
            raise _cannot(type(array))
        items = array.ravel().tolist()
        reader.sequence(b"L", items, len(items))
        return
    size = int(array.nbytes)
    reader.spend(size)
    reader.hash.update(struct.pack("<q", size))
    if not size:
        return
    if array.flags.c_contiguous:
        reader.hash.update(memoryview(array.reshape(-1).view(np.uint8)))
        return
    if array.ndim == 0:
        reader.hash.update(array.tobytes())
        return
    row = max(1, size // max(1, array.shape[0]))
    step = max(1, CHUNK // row)
    for start in range(0, array.shape[0], step):  # slabs along the first axis: C order
        block: Any = np.ascontiguousarray(array[start : start + step])
        reader.hash.update(memoryview(block.reshape(-1).view(np.uint8)))


def read_pandas(reader: Reading, value: Any, kind: type) -> None:
    """A DataFrame, Series or Index of pandas' own types (a subclass: cannot tell)."""
    import pandas as pd

    if kind is pd.DataFrame:
        reader.put(b"P", repr(value.shape).encode())
        read_index(reader, value.columns)
        read_index(reader, value.index)
        for position in range(value.shape[1]):
            read_values(reader, value.iloc[:, position].array)
        reader.read(dict(value.attrs))
        reader.read(bool(value.flags.allows_duplicate_labels))
    elif kind is pd.Series:
        reader.put(b"R", repr(value.shape).encode())
        read_index(reader, value.index)
        read_values(reader, value.array)
        reader.read(value.name)
        reader.read(dict(value.attrs))
        reader.read(bool(value.flags.allows_duplicate_labels))
    elif pd.Index in _T_MRO.__get__(kind):
        read_index(reader, value)
    elif pd.api.extensions.ExtensionArray in _T_MRO.__get__(kind):
        read_values(reader, value)
    else:
        raise _cannot(kind)


def read_index(reader: Reading, index: Any) -> None:
    import pandas as pd

    kind = type(index)
    if not _from_pandas(kind):
        raise _cannot(kind)
    reader.put(b"I", f"{kind.__name__}|{index.dtype}".encode())
    reader.read(list(index.names))
    if kind is pd.RangeIndex:
        reader.put(b"r", repr((index.start, index.stop, index.step)).encode())
    elif kind is pd.MultiIndex:
        reader.put(b"m", struct.pack("<q", len(index.levels)))
        for level in index.levels:
            read_index(reader, level)
        for codes in index.codes:
            read_array(reader, codes)
    else:
        read_values(reader, index.array)


def read_values(reader: Reading, values: Any) -> None:
    """A column's (or an Index's) values: a NumPy array or one of pandas' extension arrays."""
    import numpy as np
    import pandas as pd

    kind = type(values)
    if kind is np.ndarray:
        read_array(reader, values)
        return
    if not _from_pandas(kind):
        raise _cannot(kind)  # an extension array of another library: only its code reads it
    arrays = pd.arrays
    reader.put(b"E", f"{kind.__name__}|{values.dtype}|{len(values)}".encode())
    if kind is arrays.NumpyExtensionArray or kind is arrays.StringArray:
        read_array(reader, np.asarray(values))  # its own ndarray (strings: objects)
    elif kind is pd.Categorical:
        read_array(reader, values.codes)
        read_index(reader, values.categories)
        reader.read(bool(values.ordered))
    elif kind in (arrays.DatetimeArray, arrays.TimedeltaArray, arrays.PeriodArray):
        read_array(reader, values.asi8)  # the integers behind; unit, zone, freq in the dtype
    elif kind in (arrays.IntegerArray, arrays.FloatingArray, arrays.BooleanArray):
        read_array(reader, np.asarray(values.isna()))
        numpy_dtype = values.dtype.numpy_dtype
        read_array(reader, values.to_numpy(dtype=numpy_dtype, na_value=numpy_dtype.type(0)))
    elif kind is arrays.IntervalArray:
        read_index(reader, values.left)
        read_index(reader, values.right)
        reader.put(b"c", str(values.closed).encode())
    elif kind is arrays.SparseArray:
        read_array(reader, values.sp_values)
        read_array(reader, values.sp_index.to_int_index().indices)
        reader.read(values.fill_value)
    elif hasattr(kind, "__arrow_array__"):
        # Arrow-backed (ArrowExtensionArray, ArrowStringArray): pyarrow's arrays never change,
        # a change in pandas replaces the array, so the array's identity is its content
        reader.atom(values.__arrow_array__())
    else:
        raise _cannot(kind)


def _from_pandas(kind: type) -> bool:
    module = _T_MODULE.__get__(kind)
    return type(module) is str and (module == "pandas" or module.startswith("pandas."))
