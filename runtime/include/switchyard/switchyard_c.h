// SPDX-License-Identifier: MIT
/* Switchyard's C API: C99, for C programs and any language's FFI (C#,
   Swift, Rust, Python's ctypes). It covers what an app embedding a trained
   model needs: the library's version, the devices and why a backend is
   absent, tensors made from host memory and read back, model files loaded
   onto a device and run, safetensors files read and written, and where the
   library's messages and files go.

   Conventions:
   - A function that can fail returns sy_status; its results come through
     out-parameters, written only on success. On failure,
     sy_last_error() gives a message naming the operation, what was
     expected and what was found. No C++ exception crosses into the caller.
   - Handles the caller owns (sy_tensor, sy_model, sy_tensor_list) come from
     a *_create, *_load or *_get call and are released with the matching
     *_destroy (NULL is accepted there). sy_device handles belong to the
     library and stay valid until the process exits.
   - Strings the library returns: a device's and a backend's stay valid
     until exit; a tensor list's names and metadata until that list is next
     changed or destroyed; sy_last_error()'s until this thread's next failed
     call. Strings passed in are UTF-8 and copied when kept.
   - A handle may be used by one thread at a time; different handles may be
     used from different threads at once, as the C++ API allows.
   - Tensors are dense and row-major (C order), as in the C++ API. */
#ifndef SWITCHYARD_SWITCHYARD_C_H
#define SWITCHYARD_SWITCHYARD_C_H

#include <stddef.h>
#include <stdint.h>

#include "switchyard/version.h"

#if defined(_WIN32) && defined(SWITCHYARD_DLL)
#if defined(SWITCHYARD_BUILDING)
#define SY_API __declspec(dllexport)
#else
#define SY_API __declspec(dllimport)
#endif
#elif defined(__GNUC__) && !defined(_WIN32)
#define SY_API __attribute__((visibility("default")))
#else
#define SY_API
#endif

#ifdef __cplusplus
extern "C" {
#endif

typedef enum sy_status {
  SY_OK = 0,
  /* A NULL handle or pointer, an index out of range, a buffer of the wrong
     size, a dtype or shape that is not one. */
  SY_ERROR_INVALID_ARGUMENT = 1,
  /* Any other failure the message explains: an unknown or absent device,
     mismatched shapes or devices, an unreadable or corrupt file. */
  SY_ERROR = 2,
  /* The device (or the host) cannot provide the memory asked for. Nothing
     was changed; smaller work may succeed. */
  SY_ERROR_OUT_OF_MEMORY = 3,
  /* Past a limit of the device (its largest buffer binding, a driver's loop
     budget): the same work in smaller pieces runs. */
  SY_ERROR_DEVICE_LIMIT = 4,
  /* An unexpected failure inside the library: a bug to report. */
  SY_ERROR_INTERNAL = 5,
  /* The device stopped working (lost, hung): every later use of it fails
     the same way; other devices and the CPU keep working. */
  SY_ERROR_DEVICE_LOST = 6,
  SY_STATUS_MAX_ = 0x7fffffff /* keeps the enum 32-bit everywhere */
} sy_status;

/* Element types; the values are the C++ API's switchyard::DType. */
typedef enum sy_dtype {
  SY_F32 = 0,
  SY_I32 = 1,
  SY_U8 = 2,
  SY_I64 = 3,
  SY_BF16 = 4,               /* bfloat16, 16-bit words; computed in f32 */
  SY_F16 = 5,                /* IEEE binary16, 16-bit words; computed in f32 */
  SY_DTYPE_MAX_ = 0x7fffffff /* keeps the enum 32-bit; not a dtype */
} sy_dtype;

typedef enum sy_device_type {
  SY_DEVICE_CPU = 0,
  SY_DEVICE_INTEGRATED_GPU = 1,
  SY_DEVICE_DISCRETE_GPU = 2,
  SY_DEVICE_VIRTUAL_GPU = 3,
  SY_DEVICE_OTHER = 4,
  SY_DEVICE_TYPE_MAX_ = 0x7fffffff /* keeps the enum 32-bit; not a type */
} sy_device_type;

typedef struct sy_device sy_device;           /* the library's; valid until exit */
typedef struct sy_tensor sy_tensor;           /* the caller's: sy_tensor_destroy */
typedef struct sy_model sy_model;             /* the caller's: sy_model_destroy */
typedef struct sy_tensor_list sy_tensor_list; /* the caller's: sy_tensor_list_destroy */

/* ---- the library ---------------------------------------------------- */

/* The version of the library linked in ("0.1.0"); SWITCHYARD_VERSION is
   the headers'. */
SY_API const char* sy_version(void);
/* Why this thread's most recent failed call failed; "" when none has (at
   most 4095 bytes: a longer message is cut and ends in "..."). */
SY_API const char* sy_last_error(void);
SY_API const char* sy_status_name(sy_status s); /* "SY_ERROR_OUT_OF_MEMORY" */
SY_API const char* sy_dtype_name(sy_dtype t);   /* "f32"; NULL for a bad value */
SY_API size_t sy_dtype_size(sy_dtype t);        /* bytes per element; 0 for a bad value */

/* Receives each of the library's messages (the profiler's summary at exit,
   Vulkan validation messages: they go to stderr by default, never to
   stdout), with `user`. A NULL `fn` drops them. The handler may be called
   from any thread (a driver's among them), two at once, and at exit (the
   profiler's summary), so `user` must outlive it: a call already under way
   may still finish after the handler is replaced. It must not call into
   Switchyard (a message can come from inside a device's creation). */
typedef void (*sy_message_fn)(const char* message, void* user);
SY_API void sy_set_message_handler(sy_message_fn fn, void* user);
SY_API void sy_reset_message_handler(void); /* back to stderr */
/* Nonzero (the default): the Vulkan backend keeps its pipeline cache under
   the user's cache directory. Zero: no file of Switchyard's is read or
   written unasked (a GPU driver's own shader cache is the driver's). Set it
   before the first device call for it to cover the cache's reading. */
SY_API void sy_set_disk_cache(int enabled);

/* ---- backends and devices -------------------------------------------- */

/* Every backend this build knows ("cpu", "cuda", "vulkan"), usable or not. */
SY_API sy_status sy_backend_count(size_t* count);
/* Backend `index`: its name, whether it has a usable device here, and if
   not, why (no driver, not built in, no device); "" when available. Any of
   the out-parameters may be NULL. */
SY_API sy_status sy_backend_info(size_t index, const char** name, int* available,
                                 const char** reason);

/* The usable devices: the cpu, then each GPU backend's (sy_device_default
   gives the best). */
SY_API sy_status sy_device_count(size_t* count);
SY_API sy_status sy_device_get(size_t index, sy_device** out);
/* By name: "cpu", "vulkan", "vulkan:1", "cuda", "cuda:0" or "auto". An
   unknown or absent device fails with a message listing what there is. */
SY_API sy_status sy_device_by_name(const char* name, sy_device** out);
/* SWITCHYARD_DEVICE if set, else "auto": the best device here. */
SY_API sy_status sy_device_default(sy_device** out);
/* A device's facts; NULL, 0 or SY_DEVICE_OTHER for a NULL device. */
SY_API const char* sy_device_name(const sy_device* d);        /* "vulkan:0" */
SY_API const char* sy_device_backend(const sy_device* d);     /* "vulkan" */
SY_API const char* sy_device_description(const sy_device* d); /* "NVIDIA GeForce RTX 4090" */
SY_API int sy_device_index(const sy_device* d);
SY_API sy_device_type sy_device_kind(const sy_device* d);
SY_API const char* sy_device_type_name(sy_device_type t); /* "discrete-gpu" */
SY_API uint64_t sy_device_memory_bytes(const sy_device* d);
/* The backend's extra properties (driver version, limits), as strings. */
SY_API size_t sy_device_property_count(const sy_device* d);
SY_API sy_status sy_device_property(const sy_device* d, size_t index, const char** key,
                                    const char** value);
/* Runs everything queued on the device and waits for it. */
SY_API sy_status sy_device_synchronize(sy_device* d);

/* ---- tensors ---------------------------------------------------------- */

/* A tensor of `shape` (`ndim` dimensions; 0 gives a scalar) on `d`, holding
   a copy of `data` (numel x sy_dtype_size(dtype) bytes, row-major), or
   zeros when `data` is NULL. The memory is allocated before this returns,
   so running out of it is reported here. */
SY_API sy_status sy_tensor_create(sy_device* d, sy_dtype dtype, const int64_t* shape, size_t ndim,
                                  const void* data, sy_tensor** out);
SY_API void sy_tensor_destroy(sy_tensor* t);
/* A copy on `d` (a new handle to the same tensor when it is there already). */
SY_API sy_status sy_tensor_to(const sy_tensor* t, sy_device* d, sy_tensor** out);
/* Copies the values into `dst`, which has `dst_bytes` =
   sy_tensor_nbytes(t) bytes; waits for whatever computes them. */
SY_API sy_status sy_tensor_read(const sy_tensor* t, void* dst, size_t dst_bytes);
/* The number of dimensions into `ndim`, and the sizes into `dims`, which
   has room for `capacity` of them (too little room: SY_ERROR_INVALID_ARGUMENT
   and nothing written). Either out-parameter may be NULL. */
SY_API sy_status sy_tensor_shape(const sy_tensor* t, size_t* ndim, int64_t* dims, size_t capacity);
/* Facts of a tensor; 0, SY_F32 or NULL for a NULL tensor. */
SY_API int64_t sy_tensor_numel(const sy_tensor* t);
SY_API size_t sy_tensor_nbytes(const sy_tensor* t);
SY_API sy_dtype sy_tensor_dtype(const sy_tensor* t);
SY_API sy_device* sy_tensor_device(const sy_tensor* t);

/* ---- model files ------------------------------------------------------ */

/* The model in `path` (written by `switchyard train --save` or the C++
   nn::save), built from the architecture the file records, its weights read
   onto `d`, in evaluation mode (dropout off, batch norm's running
   statistics). */
SY_API sy_status sy_model_load(const char* path, sy_device* d, sy_model** out);
SY_API void sy_model_destroy(sy_model* m);
/* The forward pass, without autograd. `input` is on the model's device
   (sy_model_device); the output is there too. For the models `switchyard
   train` makes, the input is (batch, 784) f32 images normalized as
   sy_read_samples does, and the output (batch, 10) logits. */
SY_API sy_status sy_model_forward(sy_model* m, const sy_tensor* input, sy_tensor** out);
/* Moves the model's weights to `d`; when it fails (out of memory there), the
   model stays whole where it was. */
SY_API sy_status sy_model_to(sy_model* m, sy_device* d);
SY_API sy_device* sy_model_device(const sy_model* m);
/* Saves the model (weights and architecture) to `path`, atomically. */
SY_API sy_status sy_model_save(const sy_model* m, const char* path);
/* The weights and buffers by name ("0.weight", "1.running_mean"), as
   PyTorch's state_dict; the tensors are the model's own (read them, do not
   expect a copy). */
SY_API sy_status sy_model_state(const sy_model* m, sy_tensor_list** out);

/* ---- safetensors files and named tensors ------------------------------- */

SY_API sy_status sy_tensor_list_create(sy_tensor_list** out);
SY_API void sy_tensor_list_destroy(sy_tensor_list* l);
SY_API size_t sy_tensor_list_size(const sy_tensor_list* l);
SY_API const char* sy_tensor_list_name(const sy_tensor_list* l, size_t index);
/* A new handle to entry `index` (destroy it); by name, SY_ERROR when absent. */
SY_API sy_status sy_tensor_list_get(const sy_tensor_list* l, size_t index, sy_tensor** out);
SY_API sy_status sy_tensor_list_find(const sy_tensor_list* l, const char* name, sy_tensor** out);
/* Appends `t` (the list holds its own reference) under a new, non-empty name. */
SY_API sy_status sy_tensor_list_add(sy_tensor_list* l, const char* name, const sy_tensor* t);
/* The file's "__metadata__" strings: NULL when `key` is absent. */
SY_API const char* sy_tensor_list_metadata(const sy_tensor_list* l, const char* key);
SY_API sy_status sy_tensor_list_set_metadata(sy_tensor_list* l, const char* key, const char* value);

/* Every tensor of a safetensors file, on `d`, in file order, with the
   file's metadata. A file from anywhere is checked before it is trusted: a
   bad one is SY_ERROR naming the file and the problem. */
SY_API sy_status sy_safetensors_load(const char* path, sy_device* d, sy_tensor_list** out);
/* Writes the list's tensors and metadata to `path` atomically (a crash
   leaves the old file or the new one). */
SY_API sy_status sy_safetensors_save(const char* path, const sy_tensor_list* l);

/* ---- data ------------------------------------------------------------- */

/* Samples to run a model on, as an (N, features) f32 tensor on the cpu:
   an IDX image file (gzip or not; bytes normalized as Fashion-MNIST
   training normalizes them) or a NumPy .npy array. */
SY_API sy_status sy_read_samples(const char* path, sy_tensor** out);
/* An IDX file (the MNIST family's format, gzip or not) as a u8 tensor of
   its dimensions on the cpu: labels are (N). */
SY_API sy_status sy_read_idx(const char* path, sy_tensor** out);

#ifdef __cplusplus
} /* extern "C" */
#endif

#endif /* SWITCHYARD_SWITCHYARD_C_H */
