// whizbang._routing_policies(): each SQL-callable C function's routing policy as declared with
// WB_ROUTED_FUNCTION (bridge.h Routing), for the test that every one has one.
#include "pg/boundary/bridge.h"

extern "C" {
#include "funcapi.h"
#include "utils/builtins.h"
}

using namespace whizbang::pg;

// _routing_policies() RETURNS TABLE(symbol text, policy text)
WB_ROUTED_FUNCTION(wb_routing_policies, local) {
    pg_call([&] {
        InitMaterializedSRF(fcinfo, 0);
        ReturnSetInfo* rsinfo = reinterpret_cast<ReturnSetInfo*>(fcinfo->resultinfo);
        for (const DeclaredRouting& d : declared_routings()) {
            Datum values[2] = {CStringGetTextDatum(d.symbol), CStringGetTextDatum(routing_name(d.routing))};
            bool nulls[2] = {false, false};
            tuplestore_putvalues(rsinfo->setResult, rsinfo->setDesc, values, nulls);
        }
    });
    return (Datum)0;
}
