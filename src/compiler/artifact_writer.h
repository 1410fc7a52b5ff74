// The linker's output stage: turns a graph and the external backends' compiled modules
// its partita.Call nodes call into one artifact file (docs/format.md).
//
// What is stored: every constant some module needs at run time (the graph executor
// borrows the constants its nodes read and its tensor attributes name; a module's
// borrow and derive uses), each distinct tensor once -- identical dtype, shape, layout
// and bytes, found by content hash and confirmed byte-equal -- on a 64-byte boundary,
// or a 4096-byte page when it is 1 MiB or more. Constants nothing needs are dropped;
// constants only embedded in module blobs are listed but not stored.
//
// The same graph and modules always give the same bytes. The file appears at `path`
// complete or not at all (see AtomicFile).
#pragma once

#include <string>
#include <vector>

#include "base/safe_open.h"
#include "runtime/format.h"
#include "runtime/link_report.h"
#include "ir/graph.h"
#include "backend/backend.h"
#include "runtime/module.h"

namespace partita::artifact {

// Links `graph` -- host nodes, and `partita.Call` nodes calling into `modules` (the
// external backends' compiled modules, numbered as the Call nodes' "module"
// attribute numbers them) -- into one artifact at `path`.
// Throws Error(kUnsupported) listing the ops with no host kernel (nothing is written),
// Error(kInternal) for an inconsistent graph or module (e.g. a use of a constant
// nobody provides), Error(kIo) when the file system fails (no partial file is left,
// an existing file at `path` is untouched), Error(kInvalidArgument) when `path` is
// not a file AtomicFile may replace -- not a regular file, write-protected, or one of
// `keep` (the model and external-data files the graph was read from).
LinkReport writeArtifact(const ir::Graph& graph, const std::vector<backend::ModuleImage>& modules,
                         const std::string& path, const std::vector<SourceFile>& keep = {});
// The same with no external modules.
LinkReport writeArtifact(const ir::Graph& graph, const std::string& path);

}  // namespace partita::artifact
