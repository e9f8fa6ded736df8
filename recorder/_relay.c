/* The stdio recorder's forward path, in C: the loop that runs once per chunk.
 *
 * In Python each chunk cost about 2 us of bytecode on top of its system calls, which a session of
 * small messages felt (0.89x a plain Python relay); this loop holds no GIL and runs no bytecode.
 * It does only the common case and hands every other one back to Python (recorder/stdio.py,
 * `_pump`), which also has this loop in Python for a build without a C compiler. */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/uio.h>
#include <time.h>
#include <unistd.h>

/* Where `relay` stopped, as in recorder/stdio.py. */
enum { READ = 0, APPEND = 1, FORWARD = 2 };

/* The msgpack head of the capture record [t, code, payload]: fixarray 3, float 64, positive
 * fixint, bin 32 (tapes/cassette/capture.py, chunk_head). */
enum { HEAD_SIZE = 16 };

static void put_head(unsigned char *head, double t, uint32_t size) {
    uint64_t bits;
    memcpy(&bits, &t, sizeof bits);
    for (int i = 0; i < 8; i++)
        head[2 + i] = (unsigned char)(bits >> (56 - 8 * i));
    for (int i = 0; i < 4; i++)
        head[12 + i] = (unsigned char)(size >> (24 - 8 * i));
}

/* Seconds on the clock of Python's time.monotonic(), which the capture's other records use. */
static double monotonic(void) {
#ifdef __APPLE__
    return (double)clock_gettime_nsec_np(CLOCK_UPTIME_RAW) * 1e-9; /* mach_absolute_time() */
#else
    struct timespec now;
    clock_gettime(CLOCK_MONOTONIC, &now);
    return (double)now.tv_sec + (double)now.tv_nsec * 1e-9;
#endif
}

static PyObject *relay(PyObject *module, PyObject *args) {
    int source, sink, capture, code;
    double start;
    Py_buffer buffer, stopped;
    if (!PyArg_ParseTuple(args, "iiiidw*w*", &source, &sink, &capture, &code, &start, &buffer, &stopped))
        return NULL;
    if (stopped.len < 1 || code < 0 || code > 0x7F || buffer.len > UINT32_MAX) {
        PyBuffer_Release(&buffer);
        PyBuffer_Release(&stopped);
        PyErr_SetString(PyExc_ValueError, "relay: a one-byte flag, a code below 128, a buffer below 4 GiB");
        return NULL;
    }
    /* Set by Python, without the GIL held here, once the capture failed: the loop appends no more. */
    volatile const char *capture_failed = stopped.buf;
    unsigned char head[HEAD_SIZE] = {0x93, 0xCB, 0, 0, 0, 0, 0, 0, 0, 0, (unsigned char)code, 0xC6};
    int stage, error = 0;
    ssize_t size, written = 0;
    Py_BEGIN_ALLOW_THREADS
    for (;;) {
        size = read(source, buffer.buf, (size_t)buffer.len);
        if (size <= 0) {
            if (size < 0 && errno == EINTR)
                continue;
            stage = READ;
            error = size < 0 ? errno : 0;
            size = written = 0;
            break;
        }
        /* Appended before it is forwarded: a recorder killed at any moment has recorded every
         * byte it passed on (the page cache keeps it). */
        if (!*capture_failed) {
            put_head(head, monotonic() - start, (uint32_t)size);
            struct iovec parts[2] = {{head, HEAD_SIZE}, {buffer.buf, (size_t)size}};
            ssize_t appended;
            do
                appended = writev(capture, parts, 2);
            while (appended < 0 && errno == EINTR);
            if (appended != HEAD_SIZE + size) {
                stage = APPEND;
                error = appended < 0 ? errno : 0;
                break;
            }
        }
        if (sink < 0)
            continue;
        do
            written = write(sink, buffer.buf, (size_t)size);
        while (written < 0 && errno == EINTR);
        if (written != size) {
            stage = FORWARD;
            error = written < 0 ? errno : 0;
            written = written < 0 ? 0 : written;
            break;
        }
    }
    Py_END_ALLOW_THREADS
    PyBuffer_Release(&buffer);
    PyBuffer_Release(&stopped);
    return Py_BuildValue("(innn)", stage, (Py_ssize_t)size, (Py_ssize_t)written, (Py_ssize_t)error);
}

static PyMethodDef methods[] = {
    {"relay", relay, METH_VARARGS,
     "relay(source, sink, capture, code, start, buffer, capture_failed) -> (stage, size, written, errno)\n\n"
     "Read chunks from `source` into `buffer`, append each to `capture` as a record (its time since\n"
     "`start`, `code`, its bytes) unless `capture_failed[0]`, then write it to `sink` (unless it is\n"
     "negative), until a chunk needs Python: the end of `source` or a failed read (READ), a failed or\n"
     "short append (APPEND), a failed or short write (FORWARD), with the chunk's size, what of it was\n"
     "written, and the errno (0 for a short write or the end of `source`)."},
    {NULL, NULL, 0, NULL},
};

static struct PyModuleDef module = {PyModuleDef_HEAD_INIT, "recorder._relay", NULL, -1, methods};

PyMODINIT_FUNC PyInit__relay(void) {
    PyObject *created = PyModule_Create(&module);
#ifdef Py_GIL_DISABLED
    if (created != NULL)
        PyUnstable_Module_SetGIL(created, Py_MOD_GIL_NOT_USED); /* it keeps no Python state */
#endif
    return created;
}
