// Structural check of a cubin before it reaches the driver (blob.h, check_cubin).
#include <cstring>
#include <string>
#include <vector>

#include "blob/blob.h"

namespace cuda_triton {

namespace {

// ELF64 constants (System V gABI) and the CUDA-specific ones a cubin uses.
constexpr uint16_t kEmCuda = 190;
constexpr uint32_t kShtSymtab = 2, kShtStrtab = 3, kShtRela = 4, kShtNobits = 8, kShtRel = 9;
constexpr uint32_t kShtNvInfo = 0x70000000u;
constexpr uint16_t kShnLoReserve = 0xff00;
constexpr size_t kEhdrSize = 64, kPhdrSize = 56, kShdrSize = 64, kSymSize = 24;

template <typename T>
T load(const uint8_t* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

Status bad_cubin(const std::string& msg) {
  return Status(Code::kInvalidProgram, "malformed cubin: " + msg);
}

// [offset, offset + count * entry) inside [0, size), without overflow.
bool table_fits(uint64_t offset, uint64_t count, uint64_t entry, size_t size) {
  uint64_t bytes = 0, end = 0;
  return !__builtin_mul_overflow(count, entry, &bytes) && !__builtin_add_overflow(offset, bytes, &end) &&
         end <= size;
}

struct Section {
  uint32_t name, type, link, info;
  uint64_t offset, size, entsize;
};

}  // namespace

Status check_cubin(const uint8_t* data, size_t size) {
  if (data == nullptr || size < kEhdrSize) {
    return bad_cubin(std::to_string(size) + " bytes, shorter than an ELF header");
  }
  if (std::memcmp(data, "\x7f" "ELF", 4) != 0 || data[4] != 2 || data[5] != 1 || data[6] != 1) {
    return bad_cubin("not a little-endian ELF64 image");
  }
  if (load<uint16_t>(data + 18) != kEmCuda) {
    return bad_cubin("ELF machine " + std::to_string(load<uint16_t>(data + 18)) + " is not CUDA");
  }
  const uint64_t phoff = load<uint64_t>(data + 32), shoff = load<uint64_t>(data + 40);
  const uint16_t ehsize = load<uint16_t>(data + 52), phentsize = load<uint16_t>(data + 54);
  const uint16_t phnum = load<uint16_t>(data + 56), shentsize = load<uint16_t>(data + 58);
  const uint16_t shnum = load<uint16_t>(data + 60), shstrndx = load<uint16_t>(data + 62);
  if (ehsize != kEhdrSize) {
    return bad_cubin("ELF header size " + std::to_string(ehsize));
  }
  if (phnum > 0 && (phentsize != kPhdrSize || !table_fits(phoff, phnum, kPhdrSize, size))) {
    return bad_cubin("program header table (offset " + std::to_string(phoff) + ", " + std::to_string(phnum) +
                     " entries of " + std::to_string(phentsize) + " bytes) outside the " + std::to_string(size) +
                     "-byte image");
  }
  for (uint16_t i = 0; i < phnum; ++i) {
    const uint8_t* ph = data + phoff + i * kPhdrSize;
    const uint64_t off = load<uint64_t>(ph + 8), filesz = load<uint64_t>(ph + 32);
    if (filesz > 0 && !table_fits(off, filesz, 1, size)) {
      return bad_cubin("segment " + std::to_string(i) + " outside the image");
    }
  }
  if (shnum == 0 || shoff == 0 || shentsize != kShdrSize || !table_fits(shoff, shnum, kShdrSize, size)) {
    return bad_cubin("section header table (offset " + std::to_string(shoff) + ", " + std::to_string(shnum) +
                     " entries of " + std::to_string(shentsize) + " bytes) outside the " + std::to_string(size) +
                     "-byte image");
  }
  std::vector<Section> sh(shnum);
  for (uint16_t i = 0; i < shnum; ++i) {
    const uint8_t* p = data + shoff + i * kShdrSize;
    Section& s = sh[i];
    s.name = load<uint32_t>(p);
    s.type = load<uint32_t>(p + 4);
    s.offset = load<uint64_t>(p + 24);
    s.size = load<uint64_t>(p + 32);
    s.link = load<uint32_t>(p + 40);
    s.info = load<uint32_t>(p + 44);
    s.entsize = load<uint64_t>(p + 56);
    if (s.type != kShtNobits && s.size > 0 && !table_fits(s.offset, s.size, 1, size)) {
      return bad_cubin("section " + std::to_string(i) + " (offset " + std::to_string(s.offset) + ", " +
                       std::to_string(s.size) + " bytes) outside the image");
    }
    if (s.link >= shnum) {
      return bad_cubin("section " + std::to_string(i) + " links to section " + std::to_string(s.link));
    }
  }
  // A string table: inside the image (checked above) and NUL-terminated, so every name in it ends inside.
  auto strtab_ok = [&](uint32_t idx) {
    return idx < shnum && sh[idx].type == kShtStrtab && sh[idx].size > 0 &&
           data[sh[idx].offset + sh[idx].size - 1] == 0;
  };
  if (!strtab_ok(shstrndx)) {
    return bad_cubin("bad section-name string table index " + std::to_string(shstrndx));
  }
  for (uint16_t i = 0; i < shnum; ++i) {
    const Section& s = sh[i];
    const std::string w = "section " + std::to_string(i);
    if (s.name >= sh[shstrndx].size) {
      return bad_cubin(w + ": name offset " + std::to_string(s.name) + " outside the string table");
    }
    // Only indexed while s.size > 0, when [offset, offset + size) is known to lie inside the image.
    auto body = [&](uint64_t k) { return data + s.offset + k; };
    if (s.type == kShtSymtab) {
      if (s.entsize != kSymSize || s.size % kSymSize != 0 || !strtab_ok(s.link)) {
        return bad_cubin(w + ": bad symbol table");
      }
      for (uint64_t k = 0; k < s.size / kSymSize; ++k) {
        const uint8_t* sym = body(k * kSymSize);
        const uint16_t shndx = load<uint16_t>(sym + 6);
        if (load<uint32_t>(sym) >= sh[s.link].size || (shndx >= shnum && shndx < kShnLoReserve)) {
          return bad_cubin(w + ": symbol " + std::to_string(k) + " has a bad name or section");
        }
      }
    } else if (s.type == kShtRela || s.type == kShtRel) {
      const uint64_t ent = s.type == kShtRela ? 24 : 16;
      if (s.entsize != ent || s.size % ent != 0 || sh[s.link].type != kShtSymtab || s.info >= shnum) {
        return bad_cubin(w + ": bad relocation table");
      }
      const uint64_t nsyms = sh[s.link].size / kSymSize;
      const Section& target = sh[s.info];
      for (uint64_t k = 0; k < s.size / ent; ++k) {
        const uint8_t* r = body(k * ent);
        if ((load<uint64_t>(r + 8) >> 32) >= nsyms || load<uint64_t>(r) >= target.size) {
          return bad_cubin(w + ": relocation " + std::to_string(k) + " has a bad symbol or offset");
        }
      }
    } else if (s.type == kShtNvInfo) {
      // Attribute records: u8 format, u8 attribute, then a u16 value, or (format 4) a u16 length + that many bytes.
      uint64_t p = 0;
      while (p < s.size) {
        if (s.size - p < 4) {
          return bad_cubin(w + ": truncated attribute record");
        }
        const uint8_t format = *body(p);
        if (format < 1 || format > 4) {
          return bad_cubin(w + ": attribute format " + std::to_string(format));
        }
        const uint64_t len = format == 4 ? 4 + uint64_t(load<uint16_t>(body(p + 2))) : 4;
        if (len > s.size - p) {
          return bad_cubin(w + ": attribute record runs past the section");
        }
        p += len;
      }
    }
  }
  return Status::Ok();
}

}  // namespace cuda_triton
