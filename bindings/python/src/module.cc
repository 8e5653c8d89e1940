// The native module jtree._jtree: the C++ library for the pure-Python package jtree.
//
// It only translates (Python objects <-> jtree::Tree, Status -> exceptions, arrays <-> memory
// through nb::ndarray); see python/jtree for the API users call.
#include <nanobind/nanobind.h>
#include <nanobind/stl/string.h>

#include "common.h"
#include "device_read.h"
#include "shard_plan.h"

NB_MODULE(_jtree, m) {
  m.doc() = "jtree's C++ library, for the jtree package (not a public API)";

  m.def("_set_error_classes", &jtpy::set_error_classes, nb::arg("classes"),
        nb::arg("type_error"), nb::arg("index_error"),
        "Installs jtree's exception classes: one per status code (a sequence indexed by code), "
        "and the InvalidArgument classes that are also a TypeError and an IndexError, which "
        "the module's own argument checks raise.");

  m.def("version", [] { return std::string(jtree::version_string()); },
        "jtree's version, e.g. '0.1.0'.");
  m.attr("FORMAT_VERSION") = jtree::kFormatVersion;
  m.def("release_scratch_memory", &jtree::release_scratch_memory,
        "Frees the scratch buffers the read and save workers keep between calls "
        "(jtree::release_scratch_memory); returns the bytes freed.");

  // [(code, name, item_size, stored_bits)] of every dtype this build knows.
  m.def(
      "dtypes",
      [] {
        nb::list out;
        for (int c = 1; c < jtree::kDTypeCodeEnd; ++c) {
          auto info = jtree::dtype_info(static_cast<jtree::DType>(c));
          if (!info) continue;
          out.append(nb::make_tuple(c, nb::str(info->name.data(), info->name.size()),
                                    info->item_size, info->stored_bits));
        }
        return out;
      },
      "The dtype table: [(code, name, item_size, stored_bits)].");

  m.def("default_split_rules", &jtpy::default_split_rules,
        "jtree::default_split_rules() as [(pattern, kind, dim)].");
  m.attr("SPLIT_KINDS") = jtpy::split_kind_names();

  jtpy::register_builder(m);
  jtpy::register_reader(m);
  jtpy::register_writer(m);
  jtpy::register_device(m);
  jtpy::register_device_array(m);
  jtpy::register_rules(m);
  jtpy::register_remote_options(m);
  jtpy::register_specs(m);
}
