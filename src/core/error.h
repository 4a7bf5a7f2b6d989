// Errors raised by the pure core. The PostgreSQL layer maps `Kind` to a SQLSTATE.
#pragma once

#include <stdexcept>
#include <string>

#include "no_postgres.h"

namespace whizbang::core {

class InputError : public std::runtime_error {
public:
    enum class Kind {
        invalid_json,       // 22P02 invalid_text_representation
        invalid_parameter,  // 22023 invalid_parameter_value
        out_of_range,       // 22003 numeric_value_out_of_range
        limit_exceeded,     // 54000 program_limit_exceeded
    };
    InputError(Kind kind, const std::string& message) : std::runtime_error(message), kind_(kind) {}
    Kind kind() const noexcept { return kind_; }

private:
    Kind kind_;
};

}  // namespace whizbang::core
