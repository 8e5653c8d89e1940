// Default implementations shared by every Source and Sink backend.
#include <algorithm>
#include <cstring>
#include <utility>

#include "jtree/io.h"

namespace jtree {

Result<HeadTail> Source::read_head_tail(uint64_t head_bytes, uint64_t tail_bytes) {
  JTREE_ASSIGN_OR_RETURN(uint64_t size, this->size());
  HeadTail ht;
  ht.size = size;
  const uint64_t head = std::min(head_bytes, size);
  const uint64_t tail = std::min(tail_bytes, size);
  ht.head.resize(head);
  ht.tail.resize(tail);
  if (head == 0 && tail == 0) return ht;  // also an empty object: nothing to read

  if (head > 0 && tail > 0 && head + tail > size) {
    // The two ranges overlap (a small object): one read of the whole object fetches each
    // byte once, and both parts are cut from it. head + tail cannot overflow: each is at
    // most `size`.
    std::vector<std::byte> whole(size);
    ReadRange range{0, whole};
    JTREE_RETURN_IF_ERROR(read(std::span<const ReadRange>(&range, 1)));
    std::memcpy(ht.head.data(), whole.data(), head);
    std::memcpy(ht.tail.data(), whole.data() + (size - tail), tail);
    return ht;
  }

  ReadRange ranges[2];
  size_t count = 0;
  if (head > 0) ranges[count++] = ReadRange{0, ht.head};
  if (tail > 0) ranges[count++] = ReadRange{size - tail, ht.tail};
  JTREE_RETURN_IF_ERROR(read(std::span<const ReadRange>(ranges, count)));
  return ht;
}

Status Sink::patch(uint64_t offset, std::span<const std::byte> data) {
  return Status::not_supported(name() + ": patching written bytes is not supported by this sink");
}

Status Sink::append_from(std::string_view path_or_url, uint64_t offset, uint64_t size) {
  // Through this process, in bounded pieces.
  OpenOptions oo;
  oo.use_mmap = false;
  JTREE_ASSIGN_OR_RETURN(std::shared_ptr<Source> src, open_source(path_or_url, oo));
  constexpr uint64_t kPiece = 8ull << 20;
  std::vector<std::byte> buf(std::min(size, kPiece));
  for (uint64_t done = 0; done < size;) {
    const uint64_t n = std::min(kPiece, size - done);
    ReadRange r{offset + done, std::span(buf).first(n)};
    JTREE_RETURN_IF_ERROR(src->read(std::span<const ReadRange>(&r, 1)));
    JTREE_RETURN_IF_ERROR(append(std::span<const std::byte>(buf).first(n)));
    done += n;
  }
  return Status::success();
}

}  // namespace jtree
