// jtree/jtree.h — everything: include this one header.
//
//   #include <jtree/jtree.h>
//
//   jtree::TreeBuilder b;                       // describe the tree, pointing at your arrays
//   b.dict();
//   b.key("w").array(jtree::DType::kFloat32, {1024, 1024}, jtree::ArrayView{w.data()});
//   b.key("step").int_value(1000);
//   b.end();
//   auto tree = std::move(b).finish();
//   auto stats = jtree::save(std::move(*tree), "ckpt.jtree");
//
//   auto reader = jtree::Reader::open("ckpt.jtree");   // structure only, no chunk data
//   uint32_t w = *(*reader)->find_leaf("w");
//   std::vector<float> rows(10 * 1024);                 // rows 100..110 of w
//   (*reader)->read_box(w, {{100, 0}, {110, 1024}}, std::as_writable_bytes(std::span(rows)));
#pragma once

#include "jtree/chunk.h"
#include "jtree/device.h"
#include "jtree/dtype.h"
#include "jtree/io.h"
#include "jtree/key_path.h"
#include "jtree/key_path_pattern.h"
#include "jtree/multihost.h"
#include "jtree/options.h"
#include "jtree/reader.h"
#include "jtree/shard.h"
#include "jtree/slice.h"
#include "jtree/status.h"
#include "jtree/tree.h"
#include "jtree/writer.h"
