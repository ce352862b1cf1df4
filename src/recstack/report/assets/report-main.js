/* recstack report page: starts the page once the DOM exists (every report-*.js section is registered). */
"use strict";

RS.boot(REPORT.render);
