// NumPy .npy: "\x93NUMPY", major, minor, header length (2 bytes in 1.0, 4 in 2.0/3.0, little
// endian), a Python dict literal {'descr': .., 'fortran_order': .., 'shape': (..)}, then the data.
#include "gs/data/npy.hpp"

#include <bit>
#include <cctype>
#include <cstring>
#include <fstream>
#include <limits>

#include "gs/base/error.hpp"

namespace gs::data {

namespace {

[[noreturn]] void bad(const std::filesystem::path& path, const std::string& problem) {
  throw gs::Error(path.string() + ": " + problem);
}

// Just enough of Python's literal syntax for .npy headers: strings, True/False, tuples of ints.
class HeaderParser {
 public:
  HeaderParser(const std::string& text, const std::filesystem::path& path) : s_(text), path_(path) {}

  struct Fields {
    std::string descr;
    bool fortran_order = false;
    std::vector<std::int64_t> shape;
    bool has_descr = false, has_order = false, has_shape = false;
  };

  Fields parse() {
    Fields f;
    expect('{');
    while (true) {
      skip_space();
      if (peek() == '}') break;
      const std::string key = string_literal();
      expect(':');
      skip_space();
      if (key == "descr") {
        if (peek() != '\'' && peek() != '"')
          bad(path_, "holds a structured dtype; only little-endian float32/float64 is read");
        f.descr = string_literal();
        f.has_descr = true;
      } else if (key == "fortran_order") {
        f.fortran_order = boolean();
        f.has_order = true;
      } else if (key == "shape") {
        f.shape = int_tuple();
        f.has_shape = true;
      } else {
        bad(path_, "header has an unknown key '" + key + "'");
      }
      skip_space();
      if (peek() == ',') {
        ++pos_;
        continue;
      }
      skip_space();
      if (peek() != '}') malformed("',' or '}'");
    }
    if (!f.has_descr || !f.has_order || !f.has_shape)
      bad(path_, "header lacks one of 'descr', 'fortran_order', 'shape'");
    return f;
  }

 private:
  char peek() const { return pos_ < s_.size() ? s_[pos_] : '\0'; }
  void skip_space() {
    while (pos_ < s_.size() && std::isspace(static_cast<unsigned char>(s_[pos_]))) ++pos_;
  }
  [[noreturn]] void malformed(const std::string& expected) {
    bad(path_,
        "malformed .npy header (expected " + expected + " at offset " + std::to_string(pos_) + " of \"" + s_ + "\")");
  }
  void expect(char c) {
    skip_space();
    if (peek() != c) malformed(std::string("'") + c + "'");
    ++pos_;
  }
  std::string string_literal() {
    skip_space();
    const char quote = peek();
    if (quote != '\'' && quote != '"') malformed("a string");
    const std::size_t end = s_.find(quote, pos_ + 1);
    if (end == std::string::npos) malformed("a closing quote");
    std::string value = s_.substr(pos_ + 1, end - pos_ - 1);
    pos_ = end + 1;
    return value;
  }
  bool boolean() {
    if (s_.compare(pos_, 4, "True") == 0) {
      pos_ += 4;
      return true;
    }
    if (s_.compare(pos_, 5, "False") == 0) {
      pos_ += 5;
      return false;
    }
    malformed("True or False");
  }
  std::vector<std::int64_t> int_tuple() {
    expect('(');
    std::vector<std::int64_t> dims;
    while (true) {
      skip_space();
      if (peek() == ')') {
        ++pos_;
        return dims;
      }
      if (!std::isdigit(static_cast<unsigned char>(peek()))) malformed("a dimension");
      std::int64_t v = 0;
      while (std::isdigit(static_cast<unsigned char>(peek()))) {
        if (v > (std::numeric_limits<std::int64_t>::max() - 9) / 10) bad(path_, "dimension too large");
        v = v * 10 + (s_[pos_++] - '0');
      }
      if (peek() == 'L') ++pos_;  // Python 2 long suffix
      dims.push_back(v);
      skip_space();
      if (peek() == ',') ++pos_;
    }
  }

  const std::string& s_;
  const std::filesystem::path& path_;
  std::size_t pos_ = 0;
};

std::string describe_dtype(const std::string& descr) {
  if (descr.size() >= 2 && descr[0] == '>') return "big-endian data ('" + descr + "')";
  return "dtype '" + descr + "'";
}

// The header's text and where the data starts (the magic and the length field's bytes before the
// text), after the magic and the version are checked.
std::string read_header(std::ifstream& in, const std::filesystem::path& path, std::uint64_t file_size,
                        std::uint64_t& data_start) {
  unsigned char pre[8] = {};
  in.read(reinterpret_cast<char*>(pre), 8);
  if (in.gcount() < 8 || std::memcmp(pre, "\x93NUMPY", 6) != 0) bad(path, "not a NumPy .npy file (bad magic)");
  const int major = pre[6], minor = pre[7];
  std::uint64_t header_len = 0;
  std::uint64_t prefix = 0;
  if (major == 1) {
    unsigned char b[2] = {};
    in.read(reinterpret_cast<char*>(b), 2);
    header_len = b[0] | (std::uint64_t{b[1]} << 8);
    prefix = 10;
  } else if (major == 2 || major == 3) {
    unsigned char b[4] = {};
    in.read(reinterpret_cast<char*>(b), 4);
    header_len = b[0] | (std::uint64_t{b[1]} << 8) | (std::uint64_t{b[2]} << 16) | (std::uint64_t{b[3]} << 24);
    prefix = 12;
  } else {
    bad(path, ".npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                  " is not supported (1.0, 2.0 and 3.0 are)");
  }
  if (!in || prefix + header_len > file_size) bad(path, "file is truncated inside its header");
  std::string header(header_len, '\0');
  in.read(header.data(), static_cast<std::streamsize>(header_len));
  if (!in) bad(path, "file is truncated inside its header");
  data_start = prefix + header_len;
  return header;
}

}  // namespace

NpyArray read_npy(const std::filesystem::path& path) {
  static_assert(std::endian::native == std::endian::little, "the .npy reader assumes a little-endian machine");
  std::error_code ec;
  if (!std::filesystem::exists(path, ec)) throw MissingFile(path.string() + ": no such file");
  std::ifstream in(path, std::ios::binary);
  if (!in) bad(path, "cannot open the file");
  const std::uint64_t file_size = std::filesystem::file_size(path, ec);
  std::uint64_t data_start = 0;
  const std::string header = read_header(in, path, file_size, data_start);

  const auto fields = HeaderParser(header, path).parse();
  // '=' is native order and '|' "not applicable"; both mean little-endian here.
  std::string descr = fields.descr;
  if (descr.size() == 3 && (descr[0] == '=' || descr[0] == '|')) descr[0] = '<';
  std::size_t item = 0;
  if (descr == "<f4") {
    item = 4;
  } else if (descr == "<f8") {
    item = 8;
  } else {
    bad(path, "holds " + describe_dtype(fields.descr) +
                  "; only little-endian float32 ('<f4') or float64 ('<f8') is read "
                  "(convert with numpy: a.astype('<f4'))");
  }

  NpyArray out;
  out.dtype = descr;
  out.shape = fields.shape;
  std::uint64_t count = 1;
  for (std::int64_t d : out.shape) {
    if (d != 0 && count > std::numeric_limits<std::uint64_t>::max() / 8 / static_cast<std::uint64_t>(d))
      bad(path, "shape is too large");
    count *= static_cast<std::uint64_t>(d);
  }
  const std::uint64_t data_bytes = count * item;
  if (file_size < data_start + data_bytes)
    bad(path, "file is truncated: the header promises " + std::to_string(data_bytes) +
                  " bytes of data, the file holds " + std::to_string(file_size - data_start));
  if (file_size > data_start + data_bytes)
    bad(path, "file holds " + std::to_string(file_size - data_start - data_bytes) +
                  " bytes after the array; not a plain .npy file");

  // Values are returned in file order: C order row-major, Fortran order column-major.
  out.values.resize(count);
  if (item == 4) {
    in.read(reinterpret_cast<char*>(out.values.data()), static_cast<std::streamsize>(data_bytes));
  } else {
    std::vector<double> buf(count);
    in.read(reinterpret_cast<char*>(buf.data()), static_cast<std::streamsize>(data_bytes));
    for (std::size_t i = 0; i < count; ++i) out.values[i] = static_cast<float>(buf[i]);
  }
  if (!in) bad(path, "read error in the array data");
  return out;
}

void write_npy(const std::filesystem::path& path, const std::vector<float>& values, bool force) {
  std::error_code ec;
  if (!force && std::filesystem::exists(path, ec)) bad(path, "file exists; refusing to overwrite it (use --force)");
  std::string header = "{'descr': '<f4', 'fortran_order': False, 'shape': (" + std::to_string(values.size()) + ",), }";
  // Pad with spaces so the data starts on a 64-byte boundary, as NumPy does.
  const std::size_t total = 10 + header.size() + 1;
  header.append((64 - total % 64) % 64, ' ');
  header.push_back('\n');
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  if (!out) bad(path, "cannot create the file");
  const std::uint16_t len = static_cast<std::uint16_t>(header.size());
  const unsigned char pre[10] = {0x93,
                                 'N',
                                 'U',
                                 'M',
                                 'P',
                                 'Y',
                                 1,
                                 0,
                                 static_cast<unsigned char>(len & 0xff),
                                 static_cast<unsigned char>(len >> 8)};
  out.write(reinterpret_cast<const char*>(pre), 10);
  out.write(header.data(), static_cast<std::streamsize>(header.size()));
  out.write(reinterpret_cast<const char*>(values.data()), static_cast<std::streamsize>(values.size() * sizeof(float)));
  out.close();
  if (!out) bad(path, "write failed");
}

}  // namespace gs::data
