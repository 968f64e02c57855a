#include "runner/flags.h"

#include <cerrno>
#include <cstdlib>
#include <sstream>
#include <stdexcept>

namespace cuda_triton::runner {

void Flags::define(const std::string& name, const std::string& default_value, const std::string& help,
                   bool is_bool) {
  flags_[name] = Flag{default_value, help, is_bool};
  order_.push_back(name);
}

bool Flags::parse(int argc, char** argv, std::string* error) {
  for (int i = 1; i < argc; ++i) {
    std::string arg = argv[i];
    if (arg == "-h" || arg == "--help") {
      help_ = true;
      continue;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() == 2) {
      *error = "unexpected argument '" + arg + "' (flags look like --name value)";
      return false;
    }
    std::string name = arg.substr(2);
    std::string value;
    bool has_value = false;
    const size_t eq = name.find('=');
    if (eq != std::string::npos) {
      value = name.substr(eq + 1);
      name = name.substr(0, eq);
      has_value = true;
    }
    auto it = flags_.find(name);
    if (it == flags_.end()) {
      *error = "unknown flag --" + name;
      return false;
    }
    if (it->second.is_bool) {
      if (!has_value) {
        value = "true";
      }
      if (value != "true" && value != "false" && value != "1" && value != "0") {
        *error = "--" + name + " takes true or false, got '" + value + "'";
        return false;
      }
      it->second.value = (value == "true" || value == "1") ? "true" : "false";
      continue;
    }
    if (!has_value) {
      if (i + 1 >= argc) {
        *error = "--" + name + " needs a value";
        return false;
      }
      value = argv[++i];
    }
    it->second.value = value;
  }
  return true;
}

const std::string& Flags::str(const std::string& name) const {
  auto it = flags_.find(name);
  if (it == flags_.end()) {
    throw std::logic_error("undefined flag " + name);
  }
  return it->second.value;
}

bool Flags::boolean(const std::string& name) const {
  return str(name) == "true";
}

bool Flags::integer(const std::string& name, int64_t* out, std::string* error) const {
  const std::string& v = str(name);
  char* end = nullptr;
  errno = 0;
  long long n = std::strtoll(v.c_str(), &end, 10);
  if (v.empty() || end == nullptr || *end != '\0' || errno != 0) {
    *error = "--" + name + " must be an integer, got '" + v + "'";
    return false;
  }
  *out = n;
  return true;
}

std::string Flags::usage(const std::string& program) const {
  std::ostringstream os;
  os << "usage: " << program << " --model_path model.pte [flags]\n\nflags:\n";
  for (const std::string& name : order_) {
    const Flag& f = flags_.at(name);
    os << "  --" << name << (f.is_bool ? "" : " <value>") << "\n      " << f.help;
    if (!f.value.empty()) {
      os << " (default: " << f.value << ")";
    }
    os << "\n";
  }
  return os.str();
}

std::vector<std::string> split_commas(const std::string& s) {
  std::vector<std::string> out;
  std::string cur;
  std::istringstream is(s);
  while (std::getline(is, cur, ',')) {
    if (!cur.empty()) {
      out.push_back(cur);
    }
  }
  return out;
}

}  // namespace cuda_triton::runner
