#include "jtree/writer.h"

namespace jtree {

std::string_view version_string() { return JTREE_VERSION; }

}  // namespace jtree
