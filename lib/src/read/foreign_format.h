// Naming what people open by mistake instead of a jtree file: the checkpoint formats of the
// field (safetensors, PyTorch, NumPy, GGUF; Hugging Face and orbax directories), each with the
// `jtree convert` command that converts it. Files are recognised from the first and last bytes
// the opener reads anyway (no request more, local or remote), directories from the names of
// the files in them. The status codes stay those of any file that is not a jtree file
// (Corruption; InvalidArgument for a directory): only the messages say more.
#pragma once

#include <cstddef>
#include <cstdint>
#include <optional>
#include <span>
#include <string>
#include <string_view>

#include "jtree/status.h"

namespace jtree {

/// A format that is not jtree's, as recognised.
struct ForeignFormat {
  std::string what;  ///< "a safetensors checkpoint", "a NumPy .npz archive", ...
  /// The `jtree convert` options it needs ("--from torch"), "" for none; nullopt when
  /// `jtree convert` does not read it (a zip archive of something else).
  std::optional<std::string> convert_flags;
};

/// What a file is, from its first bytes `head` and last bytes `tail` (`size` bytes in all),
/// when it is a format jtree knows of: safetensors (an 8-byte little-endian header length,
/// then '{'), GGUF ("GGUF"), NumPy .npy ("\x93NUMPY"), a zip archive (PyTorch's when it holds
/// a data.pkl, NumPy's .npz when its members are .npy files), a Python pickle (legacy
/// PyTorch). nullopt for anything else, a jtree file included.
std::optional<ForeignFormat> identify_foreign_file(std::span<const std::byte> head,
                                                   std::span<const std::byte> tail,
                                                   uint64_t size);

/// What the local directory `path` holds, when it is a checkpoint `jtree convert` reads: a
/// Hugging Face safetensors checkpoint (an index json, or .safetensors files), an orbax
/// checkpoint (_CHECKPOINT_METADATA, _METADATA, manifest.ocdbt) or a JAX
/// pytree_serialization one (pytreedef.json). nullopt otherwise (or when it cannot be listed).
std::optional<ForeignFormat> identify_foreign_directory(const std::string& path);

/// "<name>: <what>, not a jtree file: convert it with `jtree convert <name> <stem>.jtree`"
/// (for a URL: a local copy, by its base name); without the hint when `jtree convert` does
/// not read the format.
std::string foreign_message(std::string_view name, const ForeignFormat& format);

/// The InvalidArgument for opening the directory `name` (`local_path` on this machine): what
/// it holds, when identify_foreign_directory knows, else that it is a directory.
Status directory_error(std::string_view name, const std::string& local_path);

}  // namespace jtree
