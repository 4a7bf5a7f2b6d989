// Fallback engine for the fuzz targets when clang's libFuzzer is not available (built with
// g++ and ASan/UBSan instead): runs every file of the corpus directories, then random mutations
// of them (bit flips, byte insertions and deletions, splices, runs of JSON punctuation) until a
// time or run limit. No coverage feedback, so it finds less than libFuzzer, but it takes the
// same options scripts/fuzz passes (-max_total_time=, -runs=, -seed=, -max_len=, other -flags
// ignored) and, like libFuzzer, saves an input that aborts as <artifact_prefix>crash-input.
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <dirent.h>
#include <fstream>
#include <iterator>
#include <random>
#include <string>
#include <vector>

#include "fuzz_check.h"

namespace {

std::string g_current;  // the input being run, written out by the abort handler
std::string g_artifact_prefix = "./";

void save_current(int) {
    const std::string path = g_artifact_prefix + "crash-input";
    if (std::FILE* f = std::fopen(path.c_str(), "wb")) {
        std::fwrite(g_current.data(), 1, g_current.size(), f);
        std::fclose(f);
        std::fprintf(stderr, "random_driver: input written to %s\n", path.c_str());
    }
}

void run(const std::string& input) {
    g_current = input;
    LLVMFuzzerTestOneInput(reinterpret_cast<const std::uint8_t*>(input.data()), input.size());
}

std::vector<std::string> read_dir(const std::string& dir) {
    std::vector<std::string> out;
    if (DIR* d = opendir(dir.c_str())) {
        while (dirent* e = readdir(d)) {
            if (e->d_name[0] == '.') continue;
            std::ifstream f(dir + "/" + e->d_name, std::ios::binary);
            out.emplace_back(std::istreambuf_iterator<char>(f), std::istreambuf_iterator<char>());
        }
        closedir(d);
    }
    return out;
}

std::string mutate(std::string s, const std::vector<std::string>& corpus, std::mt19937_64& rng, std::size_t max_len) {
    static const char kTokens[] = "{}[]\",:.-+eE0123456789\\u \t\ntruefalsenull\xc3\xa9\xff";
    const int rounds = 1 + static_cast<int>(rng() % 8);
    for (int r = 0; r < rounds; ++r) {
        const std::size_t at = s.empty() ? 0 : rng() % (s.size() + 1);
        switch (rng() % 6) {
            case 0: if (at < s.size()) s[at] = static_cast<char>(s[at] ^ (1u << (rng() % 8))); break;
            case 1: s.insert(at, 1, static_cast<char>(rng())); break;
            case 2: s.insert(at, 1, kTokens[rng() % (sizeof kTokens - 1)]); break;
            case 3: if (at < s.size()) s.erase(at, 1 + rng() % 4); break;
            case 4: {
                const std::string& other = corpus[rng() % corpus.size()];
                if (!other.empty()) {
                    const std::size_t from = rng() % other.size();
                    s.insert(at, other, from, 1 + rng() % (other.size() - from));
                }
                break;
            }
            default: s.insert(at, 1 + rng() % 16, kTokens[rng() % 4]); break;  // nesting
        }
    }
    if (s.size() > max_len) s.resize(max_len);
    return s;
}

}  // namespace

int main(int argc, char** argv) {
    double max_seconds = 10;
    long long runs = -1;
    std::uint64_t seed = std::random_device{}();
    std::size_t max_len = 4096;
    std::vector<std::string> corpus;
    for (int i = 1; i < argc; ++i) {
        const std::string arg = argv[i];
        auto value = [&](const char* name) -> const char* {
            const std::size_t n = std::strlen(name);
            return arg.compare(0, n, name) == 0 ? arg.c_str() + n : nullptr;
        };
        if (const char* v = value("-max_total_time=")) max_seconds = std::atof(v);
        else if (const char* v = value("-runs=")) runs = std::atoll(v);
        else if (const char* v = value("-seed=")) seed = std::strtoull(v, nullptr, 10);
        else if (const char* v = value("-max_len=")) max_len = std::strtoull(v, nullptr, 10);
        else if (const char* v = value("-artifact_prefix=")) g_artifact_prefix = v;
        else if (arg[0] != '-') {
            for (auto& s : read_dir(arg)) corpus.push_back(std::move(s));
        }
    }
    std::signal(SIGABRT, save_current);
    if (corpus.empty()) corpus.emplace_back();
    for (const auto& s : corpus) {
        run(s);
        if (s.size() > max_len) max_len = s.size();
    }

    std::mt19937_64 rng(seed);
    const auto start = std::chrono::steady_clock::now();
    long long done = static_cast<long long>(corpus.size());
    double elapsed = 0;
    while ((runs < 0 || done < runs) && elapsed < max_seconds) {
        run(mutate(corpus[rng() % corpus.size()], corpus, rng, max_len));
        if (++done % 256 == 0) elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    }
    elapsed = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    std::printf("Done %lld runs in %.0f second(s) (random_driver, seed %llu, corpus %zu, exec/s: %.0f)\n", done,
                elapsed, static_cast<unsigned long long>(seed), corpus.size(), elapsed > 0 ? done / elapsed : 0.0);
    return 0;
}
