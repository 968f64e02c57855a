// Structural checks of a .pte's program flatbuffer that ExecuTorch 1.5.1's loader does not make before it
// dereferences the fields (found by corrupting programs, tests/test_runtime_corruption.py): every delegate has an
// id and a processed-data reference, every compile spec a key and a value, every method input and output names an
// existing value, and the planned buffers fit in the machine's memory. The runner refuses a program that fails
// them instead of crashing (or hanging) inside the loader.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace cuda_triton::runner {

// `data` holds the program flatbuffer (the start of the .pte, at least the extended header's program size).
// Bounds-checked: never reads outside [data, data + size). A method's planned buffers may hold at most
// `max_planned_bytes` in all.
bool check_program_structure(const uint8_t* data, size_t size, uint64_t max_planned_bytes, std::string* error);

// Reads the program flatbuffer of the .pte at `path` and checks it (planned buffers up to the machine's physical
// memory); false with `error` set on a bad program or an unreadable file.
bool check_program_file(const std::string& path, std::string* error);

}  // namespace cuda_triton::runner
