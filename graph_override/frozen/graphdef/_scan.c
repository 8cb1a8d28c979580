/* graph_override.frozen.graphdef._scan: a one-pass reader of serialized GraphDefs.
 *
 * An optional speed-up of graph_override.frozen.graphdef.wire and .graph_index;
 * every function here has a pure-Python equivalent there, and the test
 * suite runs both and compares them (tests/test_frozen_scan.py). The extension is built by
 * `pip install` where a C compiler is at hand, and skipped otherwise.
 *
 * scan(data, resolve=True) walks the protobuf wire format of a GraphDef:
 * the top-level fields, and in each node (field 1) the fields name (1), op
 * (2) and input (3). It returns None for anything it does not read the
 * way protobuf does (a truncated field, a group, a known field with
 * another wire type, a node without exactly one name and one op, an op
 * type that is not UTF-8, a second library): the caller then takes the
 * pure-Python path, which names the culprit. Otherwise a tuple:
 *
 *   0 nodes    int32 triples (header offset, payload start, payload end)
 *   1 names    int32 pairs (offset, length) of each node's name
 *   2 ops      list of str, one per node (equal op types share one str)
 *   3 inputs   int32 pairs (offset, length) of every input, in node order
 *   4 counts   int32, inputs per node
 *   5 library  (offset, length) of the function library, or None
 *   6 names_ok every name matches [A-Za-z0-9.][A-Za-z0-9_.\-/>]*
 *   7 ops_ok   every op type matches [A-Za-z0-9_.>\-]+
 *   8 dup      index of the first node whose name an earlier node has, or -1
 *   9 src      int32 per input: the node it reads, or -1 (not found, or
 *              not of the forms NAME, NAME:DIGITS (up to 9), ^NAME)
 *  10 port     int32 per input: the output index, -1 for a control input
 *
 * The int32 arrays are bytes objects (native byte order), read with
 * numpy.frombuffer; data of 2 GB or more (protobuf's limit) returns None.
 * With resolve=False, or when the names are not well formed or repeat,
 * src and port are None. Offsets index into `data`.
 *
 * node_count(data) counts the nodes (field 1) at the top level, or
 * returns None where scan() would for the top level.
 *
 * append(data, nodes, which, suffix_of, suffixes) returns `data` with
 * suffixes[suffix_of[k]] appended to the payload of node which[k] (which
 * ascending), each node's length prefix rewritten; every other byte is
 * copied as it is.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

/* ---- growable int32 arrays, kept in the bytes object returned ------ */

typedef struct {
    PyObject *b;  /* a bytes object, grown in place and cut to size at the end */
    int32_t *a;
    Py_ssize_t n, cap;
} vec;

static int vec_init(vec *v, Py_ssize_t cap) {
    v->b = PyBytes_FromStringAndSize(NULL, cap * (Py_ssize_t)sizeof(int32_t));
    if (v->b == NULL) return -1;
    v->a = (int32_t *)PyBytes_AS_STRING(v->b);
    v->n = 0;
    v->cap = cap;
    return 0;
}

static int vec_grow(vec *v) {
    Py_ssize_t cap = v->cap * 2;
    if (_PyBytes_Resize(&v->b, cap * (Py_ssize_t)sizeof(int32_t)) < 0) return -1;
    v->a = (int32_t *)PyBytes_AS_STRING(v->b);
    v->cap = cap;
    return 0;
}

static inline int vec_push(vec *v, Py_ssize_t x) {
    if (v->n == v->cap && vec_grow(v) < 0) return -1;
    v->a[v->n++] = (int32_t)x;
    return 0;
}

/* The bytes object, cut to the values pushed; the vec gives it up. */
static PyObject *vec_finish(vec *v) {
    PyObject *b;
    if (_PyBytes_Resize(&v->b, v->n * (Py_ssize_t)sizeof(int32_t)) < 0) return NULL;
    b = v->b;
    v->b = NULL;
    return b;
}

static void vec_free(vec *v) { Py_CLEAR(v->b); }

#include "_scan_wire.h"
#include "_scan_names.h"

/* ---- scan --------------------------------------------------------- */

/* Op types as str, one object per distinct op type: a small cache in
 * front of a dict keyed by the op type's bytes. */
#define OP_SLOTS 64

typedef struct {
    PyObject *dict;  /* bytes -> str; holds the references */
    struct {
        const uint8_t *s;
        Py_ssize_t len;
        PyObject *str;  /* borrowed from dict */
    } slot[OP_SLOTS];
} op_cache;

/* A borrowed str of the op type s[0:len]; NULL with an exception set, or
 * NULL with none when it is not UTF-8. */
static PyObject *op_str(op_cache *c, const uint8_t *s, Py_ssize_t len) {
    size_t i = (size_t)hash_bytes(s, (size_t)len) & (OP_SLOTS - 1);
    PyObject *key, *str;
    if (c->slot[i].str != NULL && c->slot[i].len == len && memcmp(c->slot[i].s, s, (size_t)len) == 0)
        return c->slot[i].str;
    key = PyBytes_FromStringAndSize((const char *)s, len);
    if (key == NULL) return NULL;
    str = PyDict_GetItemWithError(c->dict, key);
    if (str == NULL && !PyErr_Occurred()) {
        str = PyUnicode_DecodeUTF8((const char *)s, len, NULL);
        if (str == NULL) {
            if (PyErr_ExceptionMatches(PyExc_UnicodeDecodeError)) PyErr_Clear();
        } else {
            int failed = PyDict_SetItem(c->dict, key, str);
            Py_DECREF(str);  /* the dict holds it */
            if (failed) str = NULL;
        }
    }
    Py_DECREF(key);
    if (str != NULL) {
        c->slot[i].s = s;
        c->slot[i].len = len;
        c->slot[i].str = str;
    }
    return str;
}

static PyObject *scan(PyObject *self, PyObject *args, PyObject *kwargs) {
    static char *keywords[] = {"data", "resolve", NULL};
    Py_buffer buf;
    int resolve = 1;
    PyObject *result = NULL, *ops = NULL, *library = NULL;
    op_cache cache;
    vec nodes = {0}, names = {0}, inputs = {0}, counts = {0}, src = {0}, port = {0};
    int names_ok = 1, ops_ok = 1, have_library = 0;
    int64_t dup = -1, library_at = 0, library_len = 0;
    table t = {0};
    (void)self;
    memset(&cache, 0, sizeof(cache));
    if (!PyArg_ParseTupleAndKeywords(args, kwargs, "y*|p", keywords, &buf, &resolve))
        return NULL;
    const uint8_t *data = (const uint8_t *)buf.buf, *end = data + buf.len, *p = data;
    if (buf.len > INT32_MAX) goto unread;  /* offsets are int32 */
    /* First sizes: about 80 bytes a node and half an input per 40 bytes. */
    cache.dict = PyDict_New();
    ops = PyList_New(0);
    if (cache.dict == NULL || ops == NULL || vec_init(&nodes, 3 * (buf.len / 80 + 16)) < 0
            || vec_init(&names, 2 * (buf.len / 80 + 16)) < 0
            || vec_init(&counts, buf.len / 80 + 16) < 0
            || vec_init(&inputs, 2 * (buf.len / 40 + 16)) < 0)
        goto error;

    while (p < end) {
        const uint8_t *head = p, *start = NULL, *stop = NULL;
        uint64_t field;
        int wt;
        if (!read_field(&p, end, &field, &wt, &start, &stop)) goto unread;
        if (field == 2) {
            if (wt != 2 || have_library) goto unread;
            have_library = 1;
            library_at = start - data;
            library_len = stop - start;
            continue;
        }
        if (field != 1) continue;  /* version, versions, debug_info, unknown */
        if (wt != 2) goto unread;
        const uint8_t *q = start, *name = NULL, *name_end = NULL, *op = NULL, *op_end = NULL;
        int n_names = 0, n_ops = 0;
        Py_ssize_t count = 0;
        while (q < stop) {
            const uint8_t *a = NULL, *b = NULL;
            if (!read_field(&q, stop, &field, &wt, &a, &b)) goto unread;
            if (field > 3) continue;
            if (wt != 2) goto unread;
            if (field == 1) {
                name = a, name_end = b, n_names++;
            } else if (field == 2) {
                op = a, op_end = b, n_ops++;
            } else {
                if (vec_push(&inputs, a - data) < 0 || vec_push(&inputs, b - a) < 0) goto error;
                count++;
            }
        }
        if (n_names != 1 || n_ops != 1) goto unread;
        PyObject *str = op_str(&cache, op, op_end - op);
        if (str == NULL) {
            if (PyErr_Occurred()) goto error;
            goto unread;  /* protobuf refuses a string that is not UTF-8 */
        }
        if (PyList_Append(ops, str) < 0 || vec_push(&nodes, head - data) < 0
                || vec_push(&nodes, start - data) < 0 || vec_push(&nodes, stop - data) < 0
                || vec_push(&names, name - data) < 0 || vec_push(&names, name_end - name) < 0
                || vec_push(&counts, count) < 0)
            goto error;
        if (names_ok && !well_formed(name, name_end - name, 0)) names_ok = 0;
        if (ops_ok && !well_formed(op, op_end - op, 1)) ops_ok = 0;
    }

    Py_ssize_t n = counts.n, m = inputs.n / 2;
    if (names_ok && n > 0) {  /* duplicates, then every input */
        if (table_init(&t, n) < 0) goto error;
        dup = table_fill(&t, data, names.a, n);
        if (dup == -2) goto unread;  /* names that collide: the Python path */
        if (dup < 0 && resolve) {
            if (vec_init(&src, m + 1) < 0 || vec_init(&port, m + 1) < 0) goto error;
            if (resolve_inputs(&t, data, inputs.a, m, src.a, port.a) < 0) goto unread;
            src.n = port.n = m;
        }
    }

    if (have_library) {
        library = Py_BuildValue("(LL)", (long long)library_at, (long long)library_len);
    } else {
        library = Py_None;
        Py_INCREF(library);
    }
    if (library == NULL) goto error;
    {
        PyObject *parts[6];
        vec *vecs[6] = {&nodes, &names, &inputs, &counts, &src, &port};
        for (int i = 0; i < 6; i++) {
            if (vecs[i]->b == NULL) {
                parts[i] = Py_None;
                Py_INCREF(Py_None);
            } else if ((parts[i] = vec_finish(vecs[i])) == NULL) {
                while (i--) Py_DECREF(parts[i]);
                goto error;
            }
        }
        result = Py_BuildValue("(NNONNNNNLNN)", parts[0], parts[1], ops, parts[2], parts[3],
                               library, PyBool_FromLong(names_ok), PyBool_FromLong(ops_ok),
                               (long long)dup, parts[4], parts[5]);
        library = NULL;  /* stolen ("N"), even on failure */
    }
    goto done;

unread:
    result = Py_None;
    Py_INCREF(result);
    goto done;
error:
    result = NULL;
done:
    Py_XDECREF(ops);
    Py_XDECREF(cache.dict);
    Py_XDECREF(library);
    table_free(&t);
    vec_free(&nodes);
    vec_free(&names);
    vec_free(&inputs);
    vec_free(&counts);
    vec_free(&src);
    vec_free(&port);
    PyBuffer_Release(&buf);
    return result;
}

/* ---- append ------------------------------------------------------- */

static PyObject *append(PyObject *self, PyObject *args) {
    Py_buffer data, spans, which, suffix_of;
    PyObject *suffixes, *result = NULL;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*y*y*y*O!", &data, &spans, &which, &suffix_of,
                          &PyList_Type, &suffixes))
        return NULL;
    const int32_t *node = (const int32_t *)spans.buf;
    const int64_t *w = (const int64_t *)which.buf, *of = (const int64_t *)suffix_of.buf;
    Py_ssize_t n_nodes = spans.len / (Py_ssize_t)(3 * sizeof(int32_t));
    Py_ssize_t k = which.len / (Py_ssize_t)sizeof(int64_t), n_suffixes = PyList_GET_SIZE(suffixes);
    Py_ssize_t size = data.len, i;
    if (suffix_of.len != which.len) {
        PyErr_SetString(PyExc_ValueError, "which and suffix_of differ in length");
        goto done;
    }
    for (i = 0; i < n_suffixes; i++) {
        if (!PyBytes_Check(PyList_GET_ITEM(suffixes, i))) {
            PyErr_SetString(PyExc_TypeError, "suffixes must be bytes");
            goto done;
        }
    }
    for (i = 0; i < k; i++) {  /* the output's size */
        if (w[i] < 0 || w[i] >= n_nodes || (i > 0 && w[i] <= w[i - 1]) || of[i] < 0
                || of[i] >= n_suffixes) {
            PyErr_SetString(PyExc_ValueError, "bad node or suffix index");
            goto done;
        }
        const int32_t *s = node + 3 * w[i];
        uint64_t len = (uint64_t)(s[2] - s[1]);
        uint64_t grown = len + (uint64_t)PyBytes_GET_SIZE(PyList_GET_ITEM(suffixes, of[i]));
        size += (Py_ssize_t)(1 + varint_size(grown) + grown) - (Py_ssize_t)(s[2] - s[0]);
    }
    result = PyBytes_FromStringAndSize(NULL, size);
    if (result == NULL) goto done;
    {
        uint8_t *out = (uint8_t *)PyBytes_AS_STRING(result);
        const uint8_t *in = (const uint8_t *)data.buf;
        Py_ssize_t at = 0;
        for (i = 0; i < k; i++) {
            const int32_t *s = node + 3 * w[i];
            PyObject *suffix = PyList_GET_ITEM(suffixes, of[i]);
            Py_ssize_t extra = PyBytes_GET_SIZE(suffix);
            memcpy(out, in + at, (size_t)(s[0] - at));
            out += s[0] - at;
            *out++ = 0x0A;  /* field 1 (node), LEN */
            out = write_varint(out, (uint64_t)(s[2] - s[1] + extra));
            memcpy(out, in + s[1], (size_t)(s[2] - s[1]));
            out += s[2] - s[1];
            memcpy(out, PyBytes_AS_STRING(suffix), (size_t)extra);
            out += extra;
            at = s[2];
        }
        memcpy(out, in + at, (size_t)(data.len - at));
    }
done:
    PyBuffer_Release(&data);
    PyBuffer_Release(&spans);
    PyBuffer_Release(&which);
    PyBuffer_Release(&suffix_of);
    return result;
}

/* ---- node_count -------------------------------------------------- */

static PyObject *node_count(PyObject *self, PyObject *args) {
    Py_buffer buf;
    Py_ssize_t count = 0;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    const uint8_t *p = (const uint8_t *)buf.buf, *end = p + buf.len;
    while (p < end) {
        const uint8_t *start, *stop;
        uint64_t field;
        int wt;
        if (!read_field(&p, end, &field, &wt, &start, &stop) || (field == 1 && wt != 2)) {
            PyBuffer_Release(&buf);
            Py_RETURN_NONE;
        }
        count += field == 1;
    }
    PyBuffer_Release(&buf);
    return PyLong_FromSsize_t(count);
}

/* ---- the hash seed ------------------------------------------------ */

static PyObject *name_hash(PyObject *self, PyObject *args) {
    Py_buffer buf;
    (void)self;
    if (!PyArg_ParseTuple(args, "y*", &buf)) return NULL;
    uint64_t h = hash_bytes((const uint8_t *)buf.buf, (size_t)buf.len);
    PyBuffer_Release(&buf);
    return PyLong_FromUnsignedLongLong((unsigned long long)h);
}

static PyMethodDef methods[] = {
    {"scan", (PyCFunction)(void (*)(void))scan, METH_VARARGS | METH_KEYWORDS,
     "scan(data, resolve=True): the index of a serialized GraphDef, or None."},
    {"node_count", node_count, METH_VARARGS,
     "node_count(data): how many nodes (field 1) the GraphDef holds, or None."},
    {"append", append, METH_VARARGS,
     "append(data, nodes, which, suffix_of, suffixes): data with node suffixes appended."},
    {"_name_hash", name_hash, METH_VARARGS,
     "_name_hash(name): the table's hash of a node name in this process (for tests)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "_scan", "A one-pass reader of serialized GraphDefs.", -1, methods,
    NULL, NULL, NULL, NULL,
};

/* Seeds the name hash from os.urandom, so that no file can be made of
 * names that collide in every process. */
PyMODINIT_FUNC PyInit__scan(void) {
    PyObject *os = PyImport_ImportModule("os"), *seed;
    if (os == NULL) return NULL;
    seed = PyObject_CallMethod(os, "urandom", "i", (int)sizeof(hash_seed));
    Py_DECREF(os);
    if (seed == NULL) return NULL;
    if (!PyBytes_Check(seed) || PyBytes_GET_SIZE(seed) != (Py_ssize_t)sizeof(hash_seed)) {
        Py_DECREF(seed);
        PyErr_SetString(PyExc_RuntimeError, "os.urandom returned no seed");
        return NULL;
    }
    memcpy(&hash_seed, PyBytes_AS_STRING(seed), sizeof(hash_seed));
    Py_DECREF(seed);
    return PyModule_Create(&module);
}
