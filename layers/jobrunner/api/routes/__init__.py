"""The api's routes, one module per resource, each a Powertools ``Router`` that ``api/app.py`` includes."""
