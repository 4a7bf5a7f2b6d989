// ndjson:PATH and ndjson:- (sink.h): one line per message, RelayMessage::json as emitted.
// Lines are collected in memory and written by flush() (or earlier, once a megabyte waits),
// which returns only after fsync: then the slot may pass them. A file is opened for appending,
// so a restarted relay adds to it; the messages after the confirmed position come again, and
// a reader deduplicates by MessageId.
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <string>

#include "relay/log.h"
#include "relay/sink.h"
#include "relay/sink_ndjson.h"

namespace whizbang::relay {
namespace {

constexpr std::size_t kWriteAhead = 1 << 20;  // bytes collected before they are written early

std::string errno_text(int e) { return std::strerror(e); }

class NdjsonSink final : public Sink {
public:
    explicit NdjsonSink(const std::string& path) : path_(path) {
        if (path == "-") {
            fd_ = STDOUT_FILENO;
            return;
        }
        fd_ = ::open(path.c_str(), O_WRONLY | O_APPEND | O_CREAT | O_CLOEXEC, 0640);
        if (fd_ < 0) {
            const int e = errno;
            // A missing directory or no permission will not fix itself; anything else might.
            throw SinkError("cannot open " + path + ": " + errno_text(e),
                            !(e == ENOENT || e == EACCES || e == EISDIR || e == ENOTDIR || e == EROFS || e == ELOOP));
        }
        owned_ = true;
        drop_torn_tail();
    }

    ~NdjsonSink() override {
        if (owned_) ::close(fd_);
    }

    void publish(const RelayMessage& message) override {
        buffer_ += message.json;
        buffer_ += '\n';
        if (buffer_.size() >= kWriteAhead) write_out();
    }

    void flush() override {
        write_out();
        if (::fsync(fd_) != 0) {
            const int e = errno;
            // stdout may be a pipe or a terminal, which have nothing to sync.
            if (!owned_ && (e == EINVAL || e == EROFS || e == ENOTSUP)) return;
            // After a failed fsync the kernel may have dropped the dirty pages: writing them
            // again is not known to work (PostgreSQL's fsync lesson), so this is not retried.
            throw SinkError("fsync of " + describe() + " failed: " + errno_text(e), false);
        }
    }

    std::string describe() const override { return "ndjson:" + path_; }

private:
    // Writes the collected lines. On a failure a file is cut back to where this write began,
    // so that no half line stays in it.
    void write_out() {
        if (buffer_.empty()) return;
        off_t before = -1;
        struct stat st {};
        if (owned_ && ::fstat(fd_, &st) == 0 && S_ISREG(st.st_mode)) before = st.st_size;
        std::size_t done = 0;
        while (done < buffer_.size()) {
            const ssize_t n = ::write(fd_, buffer_.data() + done, buffer_.size() - done);
            if (n < 0 && errno == EINTR) continue;
            if (n <= 0) {
                const int e = n < 0 ? errno : EIO;
                if (before >= 0 && ::ftruncate(fd_, before) != 0)
                    log_warning("could not cut " + path_ + " back after a failed write: " + errno_text(errno));
                buffer_.clear();  // the relay starts over from the confirmed position
                throw SinkError("write to " + describe() + " failed: " + errno_text(e),
                                !(e == EPIPE || e == EBADF || e == EINVAL || e == EFBIG));
            }
            done += static_cast<std::size_t>(n);
        }
        buffer_.clear();
    }

    // A relay killed in the middle of a write can leave a last line without its newline. Its
    // transaction was not confirmed (flush() had not returned), so it comes again: the torn
    // piece is removed, and the file stays one JSON object per line.
    void drop_torn_tail() {
        struct stat st {};
        if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode) || st.st_size == 0) return;
        int rfd = ::open(path_.c_str(), O_RDONLY | O_CLOEXEC);
        if (rfd < 0) return;
        off_t end = st.st_size, keep = 0;
        char buf[65536];
        bool found = false, whole = false;
        while (end > 0 && !found) {
            const off_t start = end > static_cast<off_t>(sizeof buf) ? end - static_cast<off_t>(sizeof buf) : 0;
            const ssize_t n = ::pread(rfd, buf, static_cast<std::size_t>(end - start), start);
            if (n != end - start) break;
            for (ssize_t i = n - 1; i >= 0; --i) {
                if (buf[i] == '\n') {
                    keep = start + i + 1;
                    found = true;
                    whole = keep == st.st_size;
                    break;
                }
            }
            end = start;
        }
        ::close(rfd);
        if (whole) return;
        if (!found && end > 0) return;  // read failed: leave the file alone
        if (::ftruncate(fd_, keep) != 0) {
            log_warning("could not remove the torn last line of " + path_ + ": " + errno_text(errno));
            return;
        }
        log_warning("removed a torn last line of " + std::to_string(st.st_size - keep) + " bytes from " + path_ +
                    " (left by an interrupted write; its transaction was not confirmed and is sent again)");
    }

    std::string path_;
    int fd_ = -1;
    bool owned_ = false;
    std::string buffer_;
};

}  // namespace

std::unique_ptr<Sink> make_ndjson_sink(const std::string& path) { return std::make_unique<NdjsonSink>(path); }

}  // namespace whizbang::relay
