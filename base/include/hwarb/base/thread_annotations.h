// hwarb/base/thread_annotations.h — Clang's thread-safety attributes, spelled once.
//
// Under Clang the macros expand to the capability attributes that -Wthread-safety checks (a lock
// type is a CAPABILITY; its lock/unlock ACQUIRE and RELEASE it; a scoped guard is a
// SCOPED_CAPABILITY; a function that needs a lock held REQUIRES it). Under any other compiler
// they expand to nothing, so annotated code builds everywhere and is checked where it can be.
#pragma once

#if defined(__clang__)
#define HWARB_THREAD_ATTR(x) __attribute__((x))
#else
#define HWARB_THREAD_ATTR(x)
#endif

#define HWARB_CAPABILITY(name) HWARB_THREAD_ATTR(capability(name))
#define HWARB_SCOPED_CAPABILITY HWARB_THREAD_ATTR(scoped_lockable)
#define HWARB_GUARDED_BY(lock) HWARB_THREAD_ATTR(guarded_by(lock))
#define HWARB_REQUIRES(...) HWARB_THREAD_ATTR(requires_capability(__VA_ARGS__))
#define HWARB_REQUIRES_SHARED(...) HWARB_THREAD_ATTR(requires_shared_capability(__VA_ARGS__))
#define HWARB_ACQUIRE(...) HWARB_THREAD_ATTR(acquire_capability(__VA_ARGS__))
#define HWARB_ACQUIRE_SHARED(...) HWARB_THREAD_ATTR(acquire_shared_capability(__VA_ARGS__))
#define HWARB_RELEASE(...) HWARB_THREAD_ATTR(release_capability(__VA_ARGS__))
#define HWARB_RELEASE_SHARED(...) HWARB_THREAD_ATTR(release_shared_capability(__VA_ARGS__))
#define HWARB_RELEASE_GENERIC(...) HWARB_THREAD_ATTR(release_generic_capability(__VA_ARGS__))
#define HWARB_ASSERT_CAPABILITY(x) HWARB_THREAD_ATTR(assert_capability(x))
#define HWARB_NO_THREAD_SAFETY_ANALYSIS HWARB_THREAD_ATTR(no_thread_safety_analysis)
