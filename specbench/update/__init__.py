"""`specbench update CONFIG --from RUN --variant NAME`: a new head of a drafter configuration RUN measured,
decided from its acceptance and RUN's step cost (docs/guide.md, "Updating a head")."""
