// A tiny command-line flag parser (the executorch wheel ships no gflags): `--name value`, `--name=value`,
// and bare `--name` for booleans. Unknown flags and missing values are errors.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

namespace cuda_triton::runner {

class Flags {
 public:
  // Declares a flag with a default and a help line. `is_bool` flags take no value (or =true/=false).
  void define(const std::string& name, const std::string& default_value, const std::string& help,
              bool is_bool = false);
  // Parses argv; returns false and sets `error` on a bad command line.
  bool parse(int argc, char** argv, std::string* error);

  const std::string& str(const std::string& name) const;
  bool boolean(const std::string& name) const;
  // Parses an integer flag; false with `error` set if it is not one.
  bool integer(const std::string& name, int64_t* out, std::string* error) const;
  bool help_requested() const {
    return help_;
  }
  std::string usage(const std::string& program) const;

 private:
  struct Flag {
    std::string value;
    std::string help;
    bool is_bool = false;
  };
  std::map<std::string, Flag> flags_;
  std::vector<std::string> order_;
  bool help_ = false;
};

// Splits "a,b,c" (empty items are dropped).
std::vector<std::string> split_commas(const std::string& s);

}  // namespace cuda_triton::runner
