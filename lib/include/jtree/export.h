// jtree/export.h — which declarations libjtree.so exports.
//
// The library is compiled with -fvisibility=hidden: only what is marked JTREE_API (the public C++
// API in these headers) or JTREE_C_API (the C API, <jtree/c.h>) is visible to programs linking
// libjtree.so; internal helpers and the dependencies' symbols stay private, so the ABI is what
// these headers say and nothing else (tests/install/check_exports.sh checks the list). On ELF the
// same attribute serves the library and its users, so there is nothing to define when building.
#pragma once

// In C++ the standard attribute syntax, so that it may follow other attributes
// (class [[nodiscard]] JTREE_API Status); in C (<jtree/c.h>) the GNU one.
#if defined(_WIN32) || !(defined(__GNUC__) || defined(__clang__))
#define JTREE_API
#elif defined(__cplusplus)
#define JTREE_API [[gnu::visibility("default")]]
#else
#define JTREE_API __attribute__((visibility("default")))
#endif
