/* Doorbells for aircc's device: a counter one thread rings and another waits on, the
 * wait spinning for a while before it sleeps on a futex, the GIL released throughout.
 *
 * Why it exists: a thread that sleeps on a condition variable and is woken from another
 * CPU costs about 25 us on a virtual machine (the idle vCPU halts; waking it is an
 * interrupt through the hypervisor), against about 1 us for one that is still spinning.
 * A small model's run (a BERT-style encoder at batch 1, 16 tokens: some 160 us of
 * kernels) paid that twice per inference: host to stream worker, and back.
 *
 * A wait spins only for the time it is given, calling sched_yield() every few
 * microseconds, so a thread that needs the CPU it spins on gets it.  The GIL is released
 * for the whole wait (and ring_wait rings before it waits, with the GIL already
 * released, so the woken thread finds the GIL free and does not sleep again on it).
 * Linux only (futex); elsewhere the module is not built and doorbell.py's pure-Python
 * bell stands in.
 */
#define PY_SSIZE_T_CLEAN
#include <Python.h>

#ifndef __linux__
#error "the doorbell module needs Linux futexes"
#endif

#include <limits.h>
#include <linux/futex.h>
#include <sched.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#define CPU_RELAX() __builtin_ia32_pause()
#elif defined(__aarch64__)
#define CPU_RELAX() __asm__ __volatile__("yield")
#else
#define CPU_RELAX() ((void)0)
#endif

/* A wait with no deadline sleeps in slices this long, checking for signals (Ctrl-C)
 * between them. */
#define SLICE_NS 50000000LL

typedef struct {
    PyObject_HEAD
    char pad0[64];
    _Atomic uint32_t count;     /* rings so far (wraps) */
    _Atomic uint32_t sleepers;  /* threads inside futex_wait on count */
    char pad1[64];
} Bell;

static int64_t now_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (int64_t)t.tv_sec * 1000000000LL + t.tv_nsec;
}

static void ring(Bell *b) {
    atomic_fetch_add(&b->count, 1);
    if (atomic_load(&b->sleepers))
        syscall(SYS_futex, (uint32_t *)&b->count, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* Spin until count != seen or spin_ns passed; 1 if rung. */
static int spin(Bell *b, uint32_t seen, int64_t spin_ns) {
    if (spin_ns <= 0)
        return atomic_load(&b->count) != seen;
    int64_t end = now_ns() + spin_ns;
    for (;;) {
        for (int i = 0; i < 64; i++) {
            if (atomic_load_explicit(&b->count, memory_order_acquire) != seen)
                return 1;
            CPU_RELAX();
        }
        if (now_ns() >= end)
            return 0;
        sched_yield();
    }
}

/* Sleep until count != seen or until the monotonic time `until` (ns); 1 if rung. */
static int sleep_until(Bell *b, uint32_t seen, int64_t until) {
    atomic_fetch_add(&b->sleepers, 1);
    int rung;
    while (!(rung = atomic_load(&b->count) != seen)) {
        int64_t left = until - now_ns();
        if (left <= 0)
            break;
        struct timespec ts = {(time_t)(left / 1000000000LL), (long)(left % 1000000000LL)};
        syscall(SYS_futex, (uint32_t *)&b->count, FUTEX_WAIT_PRIVATE, seen, &ts, NULL, 0);
    }
    atomic_fetch_sub(&b->sleepers, 1);
    return rung;
}

static PyTypeObject BellType;

/* ring_wait(other, seen, spin_ns, timeout_ns): ring `other` (a Bell or None), then wait
 * for this bell's count to differ from `seen`: spin up to spin_ns, then sleep; give up
 * after timeout_ns (< 0: never).  True if rung. */
static PyObject *bell_ring_wait(Bell *self, PyObject *const *args, Py_ssize_t nargs) {
    if (nargs != 4) {
        PyErr_SetString(PyExc_TypeError, "ring_wait(other, seen, spin_ns, timeout_ns)");
        return NULL;
    }
    Bell *other = NULL;
    if (args[0] != Py_None) {
        if (!PyObject_TypeCheck(args[0], &BellType)) {
            PyErr_SetString(PyExc_TypeError, "ring_wait: other must be a Bell or None");
            return NULL;
        }
        other = (Bell *)args[0];
    }
    unsigned long seen = PyLong_AsUnsignedLongMask(args[1]);
    long long spin_ns = PyLong_AsLongLong(args[2]);
    long long timeout_ns = PyLong_AsLongLong(args[3]);
    if (PyErr_Occurred())
        return NULL;
    uint32_t want = (uint32_t)seen;
    int rung;
    int64_t start;
    Py_BEGIN_ALLOW_THREADS
    if (other != NULL)
        ring(other);
    start = now_ns();
    if (timeout_ns >= 0 && spin_ns > timeout_ns)
        spin_ns = timeout_ns;
    rung = spin(self, want, spin_ns);
    if (!rung && timeout_ns != 0) {
        int64_t until = timeout_ns >= 0 ? start + timeout_ns : now_ns() + SLICE_NS;
        rung = sleep_until(self, want, until);
    }
    Py_END_ALLOW_THREADS
    while (!rung && timeout_ns < 0) {       /* no deadline: slices, signals between */
        if (PyErr_CheckSignals() < 0)
            return NULL;
        Py_BEGIN_ALLOW_THREADS
        rung = sleep_until(self, want, now_ns() + SLICE_NS);
        Py_END_ALLOW_THREADS
    }
    return PyBool_FromLong(rung);
}

static PyObject *bell_ring(Bell *self, PyObject *unused) {
    ring(self);
    Py_RETURN_NONE;
}

static PyObject *bell_get_count(Bell *self, void *closure) {
    return PyLong_FromUnsignedLong(atomic_load(&self->count));
}

static PyObject *bell_get_sleepers(Bell *self, void *closure) {
    return PyLong_FromUnsignedLong(atomic_load(&self->sleepers));
}

static PyObject *bell_new(PyTypeObject *type, PyObject *args, PyObject *kwds) {
    if (PyTuple_GET_SIZE(args) || (kwds && PyDict_GET_SIZE(kwds))) {
        PyErr_SetString(PyExc_TypeError, "Bell() takes no arguments");
        return NULL;
    }
    Bell *self = (Bell *)type->tp_alloc(type, 0);
    if (self != NULL) {
        atomic_init(&self->count, 0);
        atomic_init(&self->sleepers, 0);
    }
    return (PyObject *)self;
}

static PyMethodDef bell_methods[] = {
    {"ring", (PyCFunction)bell_ring, METH_NOARGS, "Ring: wake every waiter."},
    {"ring_wait", (PyCFunction)(void (*)(void))bell_ring_wait, METH_FASTCALL,
     "ring_wait(other, seen, spin_ns, timeout_ns) -> bool: ring `other` (or None), then "
     "wait until this bell's count differs from `seen` (spin, then sleep)."},
    {NULL, NULL, 0, NULL},
};

static PyGetSetDef bell_getset[] = {
    {"count", (getter)bell_get_count, NULL, "Rings so far (32 bits, wrapping).", NULL},
    {"sleepers", (getter)bell_get_sleepers, NULL, "Threads asleep on the bell.", NULL},
    {NULL, NULL, NULL, NULL, NULL},
};

static PyTypeObject BellType = {
    PyVarObject_HEAD_INIT(NULL, 0)
    .tp_name = "aircc.executor.device.doorbell_c.Bell",
    .tp_doc = "A doorbell: ring() from one thread, ring_wait() in another.",
    .tp_basicsize = sizeof(Bell),
    .tp_flags = Py_TPFLAGS_DEFAULT,
    .tp_new = bell_new,
    .tp_methods = bell_methods,
    .tp_getset = bell_getset,
};

static struct PyModuleDef module = {
    PyModuleDef_HEAD_INIT, "doorbell_c",
    "Doorbells (spin, then futex) for aircc's stream workers and run completion.", -1, NULL,
};

PyMODINIT_FUNC PyInit_doorbell_c(void) {
    if (PyType_Ready(&BellType) < 0)
        return NULL;
    PyObject *m = PyModule_Create(&module);
    if (m == NULL)
        return NULL;
    Py_INCREF(&BellType);
    if (PyModule_AddObject(m, "Bell", (PyObject *)&BellType) < 0) {
        Py_DECREF(&BellType);
        Py_DECREF(m);
        return NULL;
    }
    return m;
}
