// _required_privileges(): the table of pg/boundary/required_privileges.h as rows, for operators
// (docs/security.md) and for the tests that prove every function checks exactly these, on one
// server and through a Citus coordinator.
#include <string>
#include <vector>

#include "pg/boundary/arrays.h"
#include "pg/boundary/required_privileges.h"

using namespace whizbang::pg;

// _required_privileges() RETURNS TABLE(function_name text, needed_when text, object_name text,
//   privileges text)
WB_ROUTED_FUNCTION(wb_required_privileges, local) {
    pg_call([&] { InitMaterializedSRF(fcinfo, 0); });
    ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
    // run_maintenance checks what perform_maintenance does (required_privileges.cpp): its rows too.
    std::vector<RequiredPrivilege> rows = required_privileges();
    for (const RequiredPrivilege& r : required_privileges())
        if (std::string(r.function) == "perform_maintenance") rows.push_back({"run_maintenance", r.when, r.object, r.privileges});
    for (const RequiredPrivilege& r : rows) {
        const Datum values[4] = {text_datum(r.function), text_datum(when_needed_name(r.when)), text_datum(r.object),
                                 text_datum(privilege_names(r.privileges))};
        pg_call([&] {
            Datum row[4] = {values[0], values[1], values[2], values[3]};
            bool nulls[4] = {false, false, false, false};
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, row, nulls);
        });
    }
    return (Datum)0;
}
