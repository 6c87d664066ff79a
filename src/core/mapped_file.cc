// MappedFile over POSIX mmap.
#include "core/mapped_file.h"

#include <fcntl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

namespace roofline {

StatusOr<std::unique_ptr<MappedFile>> MappedFile::open(const std::string& path) {
  int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) {
    int e = errno;
    if (e == ENOENT) return not_found("file '" + path + "' does not exist");
    return io_error("cannot open '" + path + "': " + std::strerror(e));
  }
  struct stat st {};
  if (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode)) {
    ::close(fd);
    return io_error("'" + path + "' is not a regular file");
  }
  std::unique_ptr<MappedFile> f(new MappedFile());
  f->path_ = path;
  f->size_ = static_cast<uint64_t>(st.st_size);
  if (f->size_ > 0) {
    void* p = mmap(nullptr, f->size_, PROT_READ, MAP_PRIVATE, fd, 0);
    if (p == MAP_FAILED) {
      int e = errno;
      ::close(fd);
      return io_error("cannot map '" + path + "': " + std::strerror(e));
    }
    f->data_ = static_cast<const uint8_t*>(p);
  }
  ::close(fd);
  return f;
}

MappedFile::~MappedFile() {
  if (data_) munmap(const_cast<uint8_t*>(data_), size_);
}

StatusOr<std::string> read_text_file(const std::string& path, uint64_t max_bytes) {
  struct stat st {};
  if (stat(path.c_str(), &st) != 0) return not_found("file '" + path + "' does not exist");
  if (!S_ISREG(st.st_mode)) return io_error("'" + path + "' is not a regular file");
  if (static_cast<uint64_t>(st.st_size) > max_bytes)
    return invalid_argument("'" + path + "' is " + std::to_string(st.st_size) +
                            " bytes; more than the " + std::to_string(max_bytes) +
                            " this file may have");
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot read '" + path + "'");
  std::ostringstream ss;
  ss << in.rdbuf();
  return ss.str();
}

}  // namespace roofline
