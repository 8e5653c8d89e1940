// UTF-8 validation of the names the format says are UTF-8 (keys, type names, metadata keys).
#pragma once

#include <cstddef>
#include <optional>
#include <string>
#include <string_view>

namespace jtree {

/// The offset of the first byte of `s` that does not start a well-formed UTF-8 sequence
/// (RFC 3629: no overlong forms, no surrogates U+D800..U+DFFF, nothing above U+10FFFF), or
/// nullopt when all of `s` is valid UTF-8.
std::optional<size_t> utf8_error(std::string_view s);

/// `s` for an error message: valid UTF-8 as is except control characters and backslashes,
/// which become \xNN like every byte of an invalid sequence; cut after about `max_bytes` bytes
/// with "...". Messages stay valid UTF-8 whatever a file holds.
std::string escape_for_message(std::string_view s, size_t max_bytes = 64);

}  // namespace jtree
