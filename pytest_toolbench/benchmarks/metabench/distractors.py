"""Generates the bundled distractor tool library (``data/metabench/library/distractor_tools.json``).

Why: the paper retrieves from a 1,000-tool pool per dialogue drawn from Meta-Bench's 7,361 tools
(Meta-Tool paper). The bundled sample has far fewer tools, so pools are filled from this deterministic,
realistic library (resource x operation, ToolACE-like JSON with typed, described parameters).
It is only used when the benchmark's own tools cannot fill a pool; real data does not need it.
Regenerate with ``python -m pytest_toolbench.benchmarks.metabench.distractors OUT.json``.
"""

from __future__ import annotations

import json
import sys
from typing import Any

# (name, singular phrase, plural phrase, domain-specific filter parameter, its description)
RESOURCES: list[tuple[str, str, str, str, str]] = [
    ("hotel", "hotel", "hotels", "city", "The city where the hotel is located, e.g. Paris"),
    ("flight", "flight", "flights", "origin_airport", "IATA code of the departure airport, e.g. JFK"),
    ("restaurant", "restaurant", "restaurants", "cuisine", "Type of cuisine, e.g. Italian"),
    ("movie", "movie", "movies", "genre", "Film genre such as comedy or thriller"),
    ("book", "book", "books", "author", "Full name of the author"),
    ("song", "song", "songs", "artist", "Name of the performing artist"),
    ("podcast", "podcast episode", "podcast episodes", "show_name", "Title of the podcast show"),
    ("recipe", "recipe", "recipes", "ingredient", "Main ingredient to cook with"),
    ("stock", "stock quote", "stock quotes", "ticker", "Stock ticker symbol, e.g. AAPL"),
    ("crypto_asset", "cryptocurrency asset", "cryptocurrency assets", "symbol", "Coin symbol such as BTC"),
    ("invoice", "invoice", "invoices", "customer_id", "Identifier of the billed customer"),
    ("order", "e-commerce order", "e-commerce orders", "customer_email", "Email address of the buyer"),
    ("product", "store product", "store products", "category", "Product category, e.g. electronics"),
    ("employee", "employee record", "employee records", "department", "Department name, e.g. Sales"),
    ("patient", "patient record", "patient records", "clinic_id", "Identifier of the clinic"),
    ("appointment", "medical appointment", "medical appointments", "doctor_name", "Name of the doctor"),
    ("prescription", "prescription", "prescriptions", "medication", "Name of the medication"),
    ("vehicle", "vehicle listing", "vehicle listings", "make", "Manufacturer of the vehicle, e.g. Toyota"),
    ("parking_spot", "parking spot", "parking spots", "zone", "Parking zone code"),
    ("bike_station", "bike-sharing station", "bike-sharing stations", "district", "City district name"),
    ("train", "train connection", "train connections", "departure_station", "Name of the departure station"),
    ("bus_route", "bus route", "bus routes", "route_number", "Public bus route number"),
    ("museum", "museum exhibition", "museum exhibitions", "museum_name", "Name of the museum"),
    ("concert", "concert", "concerts", "venue", "Name of the concert venue"),
    ("sports_match", "sports match", "sports matches", "league", "Name of the league, e.g. Premier League"),
    ("athlete", "athlete profile", "athlete profiles", "sport", "Name of the sport"),
    ("team", "sports team", "sports teams", "country", "Country the team plays for"),
    ("course", "online course", "online courses", "subject", "Subject area, e.g. mathematics"),
    ("student", "student record", "student records", "school_id", "Identifier of the school"),
    ("exam", "exam result", "exam results", "student_id", "Identifier of the student"),
    ("job_posting", "job posting", "job postings", "job_title", "Title of the position"),
    ("property", "real-estate listing", "real-estate listings", "neighborhood", "Neighborhood name"),
    ("rental", "holiday rental", "holiday rentals", "destination", "Holiday destination"),
    ("pet", "adoptable pet", "adoptable pets", "species", "Animal species, e.g. dog"),
    ("plant", "plant care guide", "plant care guides", "plant_species", "Botanical name of the plant"),
    ("recipe_review", "recipe review", "recipe reviews", "recipe_id", "Identifier of the recipe"),
    ("news_article", "news article", "news articles", "topic", "News topic such as politics"),
    ("blog_post", "blog post", "blog posts", "tag", "Tag attached to the post"),
    ("support_ticket", "customer support ticket", "customer support tickets", "priority", "Ticket priority: low, medium or high"),
    ("shipment", "parcel shipment", "parcel shipments", "carrier", "Shipping carrier, e.g. DHL"),
    ("warehouse_item", "warehouse inventory item", "warehouse inventory items", "warehouse_id", "Identifier of the warehouse"),
    ("supplier", "supplier", "suppliers", "region", "Sales region"),
    ("contract", "legal contract", "legal contracts", "party_name", "Name of a contracting party"),
    ("insurance_policy", "insurance policy", "insurance policies", "policy_type", "Type of policy, e.g. home"),
    ("loan", "loan application", "loan applications", "applicant_id", "Identifier of the applicant"),
    ("bank_account", "bank account", "bank accounts", "account_holder", "Name of the account holder"),
    ("transaction", "card transaction", "card transactions", "merchant", "Merchant name"),
    ("tax_return", "tax return", "tax returns", "tax_year", "Fiscal year of the return"),
    ("energy_meter", "smart energy meter reading", "smart energy meter readings", "meter_id", "Identifier of the meter"),
    ("thermostat", "smart thermostat", "smart thermostats", "room", "Room where the device is installed"),
    ("security_camera", "security camera clip", "security camera clips", "camera_id", "Identifier of the camera"),
    ("satellite_image", "satellite image", "satellite images", "region_name", "Geographic region"),
    ("earthquake", "earthquake report", "earthquake reports", "min_magnitude", "Minimum magnitude on the Richter scale"),
    ("air_quality", "air quality measurement", "air quality measurements", "station_id", "Monitoring station identifier"),
    ("pollen", "pollen forecast", "pollen forecasts", "postal_code", "Postal code of the area"),
    ("tide", "tide table", "tide tables", "harbor", "Name of the harbor"),
    ("ski_resort", "ski resort", "ski resorts", "mountain_range", "Mountain range, e.g. Alps"),
    ("hiking_trail", "hiking trail", "hiking trails", "park_name", "National park name"),
    ("campsite", "campsite", "campsites", "state", "State or province"),
    ("wine", "wine", "wines", "grape_variety", "Grape variety, e.g. Merlot"),
    ("game", "video game", "video games", "platform", "Gaming platform, e.g. PC"),
    ("tv_show", "TV show", "TV shows", "network", "Broadcasting network"),
    ("charity", "charity organization", "charity organizations", "cause", "Cause the charity supports"),
]

# (name template, description template, extra parameters) -- {r}: resource name, {s}/{p}: phrases.
OPERATIONS: list[tuple[str, str, list[tuple[str, str, str, bool]]]] = [
    ("get_{r}_details", "Retrieve detailed information about a {s} by its identifier.",
     [("{r}_id", "string", "The unique identifier of the {s}.", True)]),
    ("search_{r}s", "Search {p} that match a free-text query and optional filters.",
     [("query", "string", "Free-text search terms.", True), ("{f}", "string", "{fd}", False),
      ("limit", "integer", "Maximum number of results to return.", False)]),
    ("list_{r}s_by_{f}", "List {p} filtered by {fh}.",
     [("{f}", "string", "{fd}", True), ("page", "integer", "Page number of the result list.", False)]),
    ("create_{r}", "Create a new {s} with the given attributes.",
     [("name", "string", "Display name of the new {s}.", True),
      ("{f}", "string", "{fd}", True), ("notes", "string", "Optional free-text notes.", False)]),
    ("update_{r}", "Update one or more fields of an existing {s}.",
     [("{r}_id", "string", "The unique identifier of the {s}.", True),
      ("fields", "object", "Mapping of field names to their new values.", True)]),
    ("delete_{r}", "Permanently delete a {s}.",
     [("{r}_id", "string", "The unique identifier of the {s} to delete.", True),
      ("confirm", "boolean", "Must be true to confirm the deletion.", True)]),
    ("count_{r}s", "Count the {p} that match a filter, for reporting dashboards.",
     [("{f}", "string", "{fd}", True)]),
    ("export_{r}s_csv", "Export {p} as a CSV file and return a download link.",
     [("{f}", "string", "{fd}", False), ("columns", "array", "Columns to include in the export.", False)]),
    ("get_{r}_history", "Get the change history of a {s} between two dates.",
     [("{r}_id", "string", "The unique identifier of the {s}.", True),
      ("start_date", "string", "Start date in YYYY-MM-DD format.", True),
      ("end_date", "string", "End date in YYYY-MM-DD format.", True)]),
    ("rate_{r}", "Submit a rating from 1 to 5 for a {s}.",
     [("{r}_id", "string", "The unique identifier of the {s}.", True),
      ("rating", "integer", "Rating between 1 and 5.", True), ("comment", "string", "Optional review text.", False)]),
    ("get_{r}_statistics", "Compute summary statistics (count, average, trend) over {p}.",
     [("{f}", "string", "{fd}", True), ("period", "string", "Aggregation period: day, week or month.", True)]),
    ("subscribe_{r}_alerts", "Subscribe to notifications when new {p} appear.",
     [("{f}", "string", "{fd}", True), ("email", "string", "Email address that receives the alerts.", True)]),
    ("compare_{r}s", "Compare two {p} side by side.",
     [("first_id", "string", "Identifier of the first {s}.", True),
      ("second_id", "string", "Identifier of the second {s}.", True)]),
    ("recommend_{r}s", "Recommend {p} tailored to a user's preferences.",
     [("user_id", "string", "Identifier of the user to recommend for.", True),
      ("{f}", "string", "{fd}", False), ("count", "integer", "How many recommendations to return.", False)]),
    ("translate_{r}_description", "Translate the description of a {s} into another language.",
     [("{r}_id", "string", "The unique identifier of the {s}.", True),
      ("target_language", "string", "ISO 639-1 code of the target language, e.g. de.", True)]),
    ("share_{r}", "Share a {s} with another user by email.",
     [("{r}_id", "string", "The unique identifier of the {s}.", True),
      ("recipient_email", "string", "Email address of the recipient.", True)]),
    ("validate_{r}", "Check a {s} for missing or inconsistent data.",
     [("{r}_id", "string", "The unique identifier of the {s}.", True)]),
]


_S = "string"


def _tool(name: str, description: str, params: list[tuple[str, str, str, bool]]) -> dict[str, Any]:
    """A tool in the library's JSON shape from (name, type, description, required) rows."""
    return {"name": name, "description": description, "parameters": {
        "type": "object", "properties": {p: {"type": t, "description": d} for p, t, d, _ in params},
        "required": [p for p, _, _, r in params if r]}}


#: Hand-written near-duplicates of the sample's gold tools (same domain, similar name and
#: description, different parameters), as the real 7,361-tool library has them. Why: with only
#: the resource x operation tools, every gold query's nearest neighbour was its gold tool at any
#: alpha, so the alpha ablation (paper Table 6) could not move HR@k. Some share the gold tool's
#: description but not its parameters (alpha 1.0 confuses them), others share generic
#: parameters ("Name of the city") with many tools (a low alpha confuses those).
NEAR_DUPLICATES: list[dict[str, Any]] = [
    # traffic (gold: get_traffic_report(location))
    _tool("get_traffic_incidents", "Get the current traffic incidents, accidents and road closures on a highway",
      [("highway", _S, "Highway or road identifier, e.g. I-95", True)]),
    _tool("get_traffic_flow", "Get the latest traffic flow speed and congestion level of a road segment",
      [("latitude", "number", "Latitude of the road segment", True), ("longitude", "number", "Longitude of the road segment", True)]),
    _tool("get_traffic_camera_image", "Get the most recent image from a roadside traffic camera",
      [("camera_id", _S, "Identifier of the traffic camera", True)]),
    # currency (gold: convert_currency(amount, from_currency, to_currency))
    _tool("get_exchange_rate", "Get the current exchange rate between two currencies",
      [("base_currency", _S, "ISO 4217 code of the base currency, e.g. USD", True), ("quote_currency", _S, "ISO 4217 code of the quote currency, e.g. EUR", True)]),
    _tool("get_historical_exchange_rate", "Get the exchange rate between two currencies on a past date",
      [("base_currency", _S, "ISO 4217 code of the base currency", True), ("quote_currency", _S, "ISO 4217 code of the quote currency", True), ("date", _S, "Date in YYYY-MM-DD format", True)]),
    _tool("convert_cryptocurrency", "Convert an amount of a cryptocurrency into a fiat currency at the live price",
      [("amount", "number", "How many coins to convert", True), ("coin", _S, "Coin symbol, e.g. BTC", True), ("fiat_currency", _S, "Fiat currency code, e.g. USD", True)]),
    # flights (gold: track_flight_status(flight_number))
    _tool("get_airport_departures", "Get the live departure board of an airport with delays and gates",
      [("airport_code", _S, "IATA code of the airport, e.g. FRA", True)]),
    _tool("get_flight_delay_statistics", "Get historical on-time performance and delay statistics for an airline route",
      [("airline_code", _S, "IATA code of the airline, e.g. LH", True), ("route", _S, "Route as origin-destination, e.g. FRA-JFK", True)]),
    _tool("search_flight_offers", "Search available flights between two airports on a date",
      [("origin", _S, "IATA code of the departure airport", True), ("destination", _S, "IATA code of the arrival airport", True), ("date", _S, "Travel date in YYYY-MM-DD format", True)]),
    # environment (gold: get_air_quality_index(city), get_uv_index(location), get_pollen_count(city))
    _tool("get_air_pollution_forecast", "Forecast air pollution levels for the coming days at a location",
      [("latitude", "number", "Latitude of the location", True), ("longitude", "number", "Longitude of the location", True), ("days", "integer", "Number of forecast days", False)]),
    _tool("get_uv_forecast", "Forecast the ultraviolet radiation index for a date",
      [("latitude", "number", "Latitude of the location", True), ("longitude", "number", "Longitude of the location", True), ("date", _S, "Date in YYYY-MM-DD format", True)]),
    _tool("get_allergy_forecast", "Forecast allergy risk from pollen and mold for an area",
      [("zip_code", _S, "ZIP code of the area", True)]),
    _tool("get_weather_forecast", "Get the weather forecast for a city",
      [("city", _S, "Name of the city", True), ("days", "integer", "Number of forecast days", False)]),
    _tool("get_humidity", "Get the current relative humidity in a city",
      [("city", _S, "Name of the city", True)]),
    # language (gold: translate_text(text, target_language), find_synonyms(word))
    _tool("detect_language", "Detect which language a piece of text is written in",
      [("text", _S, "The text to analyse", True)]),
    _tool("translate_document", "Translate an uploaded document into another language",
      [("document_url", _S, "URL of the document to translate", True), ("target_language", _S, "Target language code, e.g. de", True)]),
    _tool("find_antonyms", "Find words with the opposite meaning of a given English word",
      [("word", _S, "The English word", True)]),
    _tool("get_word_definition", "Look up the dictionary definition of an English word",
      [("word", _S, "The English word to define", True)]),
    _tool("get_movie_reviews", "Get critic and audience reviews of a movie", [("movie_title", _S, "Title of the movie", True)]),
    _tool("search_cinemas", "Find cinemas near a location", [("city", _S, "City to search in", True)]),
    _tool("buy_movie_tickets", "Buy tickets for a movie screening", [("screening_id", _S, "Identifier of the screening", True), ("seats", "integer", "Number of seats", True)]),
    _tool("estimate_shipping_cost", "Estimate the cost of shipping a parcel",
      [("weight_kg", "number", "Weight of the parcel in kilograms", True), ("origin_postal_code", _S, "Postal code of the sender", True), ("destination_postal_code", _S, "Postal code of the recipient", True)]),
    _tool("schedule_package_pickup", "Schedule a courier pickup of a parcel", [("address", _S, "Pickup address", True), ("date", _S, "Pickup date in YYYY-MM-DD format", True)]),
    _tool("get_delivery_time_estimate", "Estimate when a parcel sent today will be delivered",
      [("origin_postal_code", _S, "Postal code of the sender", True), ("destination_postal_code", _S, "Postal code of the recipient", True)]),
    _tool("calculate_daily_calorie_needs", "Calculate how many calories a person needs per day",
      [("age", "integer", "Age in years", True), ("weight_kg", "number", "Body weight in kilograms", True), ("activity_level", _S, "Activity level: low, moderate or high", True)]),
    _tool("find_recipes_by_ingredients", "Find recipes that can be cooked with the given ingredients",
      [("ingredients", "array", "List of available ingredients", True)]),
    _tool("log_meal", "Log a meal in a food diary", [("food_item", _S, "Name of the food eaten", True), ("meal", _S, "breakfast, lunch or dinner", True)]),
    _tool("get_restaurant_menu", "Get the menu and prices of a restaurant", [("restaurant_name", _S, "Name of the restaurant", True)]),
    _tool("cancel_restaurant_reservation", "Cancel an existing restaurant reservation", [("reservation_id", _S, "Identifier of the reservation", True)]),
    _tool("get_restaurant_opening_hours", "Get the opening hours of a restaurant", [("restaurant_name", _S, "Name of the restaurant", True), ("day", _S, "Day of the week", False)]),
    _tool("buy_train_ticket", "Buy a train ticket for a connection", [("connection_id", _S, "Identifier of the train connection", True), ("passengers", "integer", "Number of passengers", True)]),
    _tool("get_train_delays", "Get current delays and cancellations at a train station", [("station", _S, "Name of the station", True)]),
    _tool("get_bus_timetable", "Get the bus timetable between two stops on a date",
      [("from_stop", _S, "Departure bus stop", True), ("to_stop", _S, "Arrival bus stop", True), ("date", _S, "Travel date in YYYY-MM-DD format", True)]),
    _tool("get_thermostat_temperature", "Get the current temperature reading of a smart thermostat", [("device_id", _S, "Identifier of the thermostat", True)]),
    _tool("set_thermostat_schedule", "Set the weekly heating schedule of a smart thermostat",
      [("device_id", _S, "Identifier of the thermostat", True), ("schedule", "object", "Mapping of weekdays to temperature periods", True)]),
    _tool("set_light_brightness", "Set the brightness of a smart light bulb", [("device_id", _S, "Identifier of the light", True), ("brightness", "integer", "Brightness from 0 to 100", True)]),
    _tool("get_tsunami_warnings", "Get active tsunami warnings for a coastal region", [("region", _S, "Coastal region name", True)]),
    _tool("get_volcano_activity", "Get the activity level of volcanoes near a location", [("location", _S, "City or region to check", True)]),
    _tool("get_seismic_hazard_map", "Get the long-term earthquake hazard map of a region", [("region", _S, "Region name", True)]),
    _tool("calculate_loan_interest", "Calculate the total interest paid on a loan",
      [("principal", "number", "Loan amount", True), ("annual_rate", "number", "Annual interest rate in percent", True), ("years", "integer", "Loan term in years", True)]),
    _tool("get_mortgage_rates", "Get current mortgage interest rates offered by lenders", [("loan_type", _S, "fixed or variable", True), ("state", _S, "US state", True)]),
    _tool("calculate_affordable_home_price", "Calculate the home price a buyer can afford",
      [("annual_income", "number", "Yearly gross income", True), ("down_payment", "number", "Available down payment", True)]),
]


def _fmt(text: str, r: str, s: str, p: str, f: str, fd: str) -> str:
    return text.format(r=r, s=s, p=p, f=f, fd=fd, fh=f.replace("_", " "))


def generate() -> list[dict[str, Any]]:
    """The library, in a fixed order: every resource x every operation (1,071 tools), then the
    42 near-duplicates."""
    tools: list[dict[str, Any]] = []
    for r, s, p, f, fd in RESOURCES:
        for name_t, desc_t, params_t in OPERATIONS:
            properties: dict[str, Any] = {}
            required: list[str] = []
            for pname_t, ptype, pdesc_t, req in params_t:
                pname = _fmt(pname_t, r, s, p, f, fd)
                if pname in properties:
                    continue
                properties[pname] = {"type": ptype, "description": _fmt(pdesc_t, r, s, p, f, fd)}
                if req:
                    required.append(pname)
            tools.append({
                "name": _fmt(name_t, r, s, p, f, fd),
                "description": _fmt(desc_t, r, s, p, f, fd),
                "parameters": {"type": "object", "properties": properties, "required": required},
            })
    return tools + NEAR_DUPLICATES


def dumps(tools: list[dict[str, Any]]) -> str:
    """One tool per line: small, and diffs show which tool changed."""
    return "[\n" + ",\n".join(json.dumps(t, ensure_ascii=False) for t in tools) + "\n]\n"


def main(argv: list[str] | None = None) -> int:
    """The regeneration command: the library written to OUT. A parser, not ``sys.argv[1]``, so
    that ``--help`` prints the usage instead of writing the library to a file named ``--help``,
    and no argument is a usage line instead of an IndexError."""
    import argparse

    parser = argparse.ArgumentParser(
        prog="python -m pytest_toolbench.benchmarks.metabench.distractors",
        description="Write the Meta-Bench distractor tool library (the bundled "
                    "data/metabench/library/distractor_tools.json) to OUT.",
    )
    parser.add_argument("out", metavar="OUT.json", help="the file to write (replaced)")
    args = parser.parse_args(argv)
    with open(args.out, "w", encoding="utf-8") as fh:
        fh.write(dumps(generate()))
    return 0


if __name__ == "__main__":  # pragma: no cover - regeneration helper
    sys.exit(main())
