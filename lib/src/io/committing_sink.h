// The one commit sequence of the library's sinks (file_sink.cc, remote/s3_sink.cc): a closed
// sink refuses; a sink whose writes failed does not commit; otherwise the backend finishes
// (fsync + rename, or the upload's completion); any failure aborts, so that nothing partial
// is ever visible; the sink is closed either way.
#pragma once

#include <string>

#include "jtree/io.h"

namespace jtree::io {

class CommittingSink : public Sink {
 public:
  Status commit() final {
    if (closed_) return Status::invalid_argument(name() + ": sink is closed");
    Status st = write_error();
    if (st.ok()) st = finish();
    if (!st.ok()) abort();
    closed_ = true;
    if (st.ok()) committed();
    return st;
  }

 protected:
  /// The first failure of the writes, which sticks (a sink with a hole or a lost part must
  /// not commit); OK if none.
  virtual Status write_error() = 0;
  /// Makes the appended bytes the object. A failure is followed by abort().
  virtual Status finish() = 0;
  /// After a successful commit: best-effort work that cannot fail the commit any more.
  virtual void committed() {}

  bool closed_ = false;  ///< committed or aborted: abort() sets it too
};

}  // namespace jtree::io
